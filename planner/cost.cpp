// FLOP and byte counts per op, the split of collective bytes over hosts, and the time
// estimate.
#include "planner/cost.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "planner/layer_kinds.h"
#include "planner/layer_ops.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"
#include "planner/sharding.h"
#include "planner/sync_groups.h"
#include "planner/workspace.h"

namespace popkit::planner {
namespace {

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

class Costs {
 public:
  explicit Costs(Plan& plan) : plan_(plan) {}

  void annotate(Op& op) {
    op.flops = op.host_bytes = op.remote_bytes = op.collective_bytes = op.pipeline_bytes = 0;
    switch (op.kind) {
      case OpKind::kHostLoad:
      case OpKind::kHostStore:
        op.host_bytes = bytes(the_tensor(op));
        break;
      case OpKind::kRemoteLoad:
      case OpKind::kRemoteStore:
        op.remote_bytes = bytes(the_tensor(op));
        break;
      case OpKind::kSend:  // to the next or the previous pipeline stage
        op.pipeline_bytes = bytes(op.inputs[shard_operand::kSrc]);
        break;
      // Collectives, as the engine's backends run them: direct exchanges within a group of
      // G members (engine/runtime/collectives.h). Each byte a member sends is a byte
      // another receives, so a group moves twice what it sends; members move different
      // bytes when a tensor does not split evenly, and the plan, one for every replica,
      // holds the mean over the G members, rounded down. The mean does not depend on
      // where the chunks are cut.
      case OpKind::kAllGather: {
        // Every member's shard, truncated to the full tensor, goes to the G-1 others: the
        // group sends (G-1) full tensors.
        const std::uint64_t g = u(op.grouping.group_size);
        op.collective_bytes = 2 * (g - 1) * bytes(op.outputs[shard_operand::kDst]) / g;
        break;
      }
      case OpKind::kReduceScatter: {
        // The member holding shard k receives slice k (the part inside the tensor) from the
        // G-1 others of its group in `grouping`; a group of G holds G / S copies of each of
        // the S slices, so it sends (G-1) (G / S) times the scattered bytes.
        const std::uint64_t g = u(op.grouping.group_size);
        const std::uint64_t s = u(op.shard_grouping.group_size);
        const std::uint64_t scattered = std::min(bytes(op.inputs[shard_operand::kSrc]),
                                                 s * bytes(op.outputs[shard_operand::kDst]));
        op.collective_bytes = 2 * (g - 1) * scattered / s;
        break;
      }
      case OpKind::kAllReduce: {
        // The owner of each chunk receives it from the G-1 others and sends the sum back to
        // them: the group sends 2 (G-1) tensors.
        const std::uint64_t g = u(op.grouping.group_size);
        op.collective_bytes = 4 * (g - 1) * bytes(the_tensor(op)) / g;
        break;
      }
      case OpKind::kForward: {
        // Every kind's first input is the layer's input (layer_kinds.h).
        const LayerInfo& l = layer(op.layer);
        op.flops = layer_kind(l.kind).forward_flops(l, rows(op.inputs[0]));
        break;
      }
      case OpKind::kLoss: {
        // softmax (exp, sum, divide), log, and the gradient: about 5 per logit.
        op.flops = 5 * u(nelms(op.inputs[loss_operand::kLogits]));
        break;
      }
      case OpKind::kBackward: {
        // Every kind's first input is the layer's input or the output's gradient, both
        // a micro-batch of rows, and its first output the input's gradient.
        const LayerInfo& l = layer(op.layer);
        op.flops = layer_kind(l.kind).backward_flops(l, rows(op.inputs[0]), op.outputs[0] >= 0);
        break;
      }
      case OpKind::kOptimizerStep:
        op.flops = optimizer_flops_per_element(plan_.optimizer) *
                   u(nelms(op.state[optimizer_operand::kWeight]));
        break;
      case OpKind::kRepeat:
        for (Op& inner : op.body) {
          annotate(inner);
          op.flops += inner.flops * u(op.steps);
          op.host_bytes += inner.host_bytes * u(op.steps);
          op.remote_bytes += inner.remote_bytes * u(op.steps);
          op.collective_bytes += inner.collective_bytes * u(op.steps);
        }
        break;
      default:
        break;
    }
  }

 private:
  std::uint64_t bytes(int t) const { return plan_.tensors[static_cast<std::size_t>(t)].nbytes; }
  std::int64_t nelms(int t) const { return plan_.tensors[static_cast<std::size_t>(t)].nelms; }
  std::uint64_t rows(int t) const {
    const auto& shape = plan_.tensors[static_cast<std::size_t>(t)].shape;
    return shape.empty() ? 1 : u(shape[0]);
  }
  const LayerInfo& layer(int k) const { return plan_.layers[static_cast<std::size_t>(k)]; }

  Plan& plan_;
};

// The messages of one collective op, replica by replica and host by host.
class TrafficCount {
 public:
  TrafficCount(const Plan& plan, const NetworkProfile& net)
      : plan_(plan),
        net_(net),
        n_hosts_(net.n_hosts(plan.replication_factor)),
        messages_(static_cast<std::size_t>(plan.replication_factor)),
        host_out_(static_cast<std::size_t>(n_hosts_)),
        host_in_(static_cast<std::size_t>(n_hosts_)) {}

  const NetworkProfile& network() const { return net_; }

  CollectiveTraffic count(const Op& op) {
    std::fill(messages_.begin(), messages_.end(), 0);
    std::fill(host_out_.begin(), host_out_.end(), 0);
    std::fill(host_in_.begin(), host_in_.end(), 0);
    t_ = {};
    const ReplicaGrouping& g = op.grouping;
    switch (op.kind) {
      case OpKind::kAllReduce: {
        // Owner chunks (engine/runtime/collectives.h owner_chunk): n = q G + r elements,
        // chunk k holds q + (k < r) of them. Every member sends chunk k to its owner, the
        // member of rank k, which sends the sum back to every other member.
        const Tensor& t = tensor(op.state[0]);
        const auto e = static_cast<std::uint64_t>(dtype_size(t.dtype));
        for (std::int64_t group = 0; group < g.n_groups(); ++group) {
          const auto members = g.members(group);
          const auto n_members = static_cast<std::int64_t>(members.size());
          for (std::int64_t k = 0; k < n_members; ++k) {
            const std::uint64_t chunk = u(owner_chunk(t.nelms, n_members, k).n) * e;
            if (chunk == 0) continue;
            const std::int64_t owner = members[static_cast<std::size_t>(k)];
            for (const auto m : members) {
              send(m, owner, chunk);
              send(owner, m, chunk);
            }
          }
        }
        break;
      }
      case OpKind::kReduceScatter: {
        // The member of shard rank k receives slice k, truncated to the tensor, from every
        // other member of its group in `grouping`.
        const Tensor& src = tensor(op.inputs[shard_operand::kSrc]);
        const Tensor& dst = tensor(op.outputs[shard_operand::kDst]);
        const auto e = static_cast<std::uint64_t>(dtype_size(dst.dtype));
        for (std::int64_t group = 0; group < g.n_groups(); ++group) {
          const auto members = g.members(group);
          for (const auto to : members) {
            const std::int64_t n =
                shard_extent(src.nelms, dst.nelms, op.shard_grouping.rank_in_group(to));
            for (const auto from : members) send(from, to, u(n) * e);
          }
        }
        break;
      }
      case OpKind::kAllGather: {
        // Every member receives the shard of every other, truncated to its destination.
        const Tensor& src = tensor(op.inputs[shard_operand::kSrc]);
        const Tensor& dst = tensor(op.outputs[shard_operand::kDst]);
        const auto e = static_cast<std::uint64_t>(dtype_size(dst.dtype));
        for (std::int64_t group = 0; group < g.n_groups(); ++group) {
          const auto members = g.members(group);
          for (const auto to : members)
            for (std::size_t k = 0; k < members.size(); ++k)
              send(members[k], to,
                   u(shard_extent(dst.nelms, src.nelms, static_cast<std::int64_t>(k))) * e);
        }
        break;
      }
      case OpKind::kRepeat: {
        CollectiveTraffic sum;
        for (const Op& inner : op.body) {
          const CollectiveTraffic c = count(inner);
          sum.on_host_bytes += c.on_host_bytes * u(op.steps);
          sum.cross_host_bytes += c.cross_host_bytes * u(op.steps);
          sum.busiest_link_bytes += c.busiest_link_bytes * u(op.steps);
          sum.busiest_messages += c.busiest_messages * u(op.steps);
        }
        return sum;
      }
      default:
        return {};
    }
    for (std::size_t h = 0; h < host_out_.size(); ++h)
      t_.busiest_link_bytes = std::max({t_.busiest_link_bytes, host_out_[h], host_in_[h]});
    t_.busiest_messages = *std::max_element(messages_.begin(), messages_.end());
    return t_;
  }

 private:
  using Tensor = DeviceTensor;
  const Tensor& tensor(int t) const { return plan_.tensors[static_cast<std::size_t>(t)]; }

  // A copy within one replica is no message; each byte sent is a byte received.
  void send(std::int64_t from, std::int64_t to, std::uint64_t nbytes) {
    if (from == to || nbytes == 0) return;
    const std::int64_t hf = net_.host_of(from);
    const std::int64_t ht = net_.host_of(to);
    if (hf == ht) {
      t_.on_host_bytes += 2 * nbytes;
      return;
    }
    t_.cross_host_bytes += 2 * nbytes;
    host_out_[static_cast<std::size_t>(hf)] += nbytes;
    host_in_[static_cast<std::size_t>(ht)] += nbytes;
    ++messages_[static_cast<std::size_t>(from)];
  }

  const Plan& plan_;
  const NetworkProfile& net_;
  std::int64_t n_hosts_;
  std::vector<std::uint64_t> messages_;  // by replica, sent across hosts
  std::vector<std::uint64_t> host_out_, host_in_;
  CollectiveTraffic t_;
};

// An op's time, in two parts: `transfer`, the bytes of host and remote streams over their
// links, which io_overlapped can hide behind compute; and `serial`, everything else
// (compute, collectives, the overheads and latencies of every op), which it cannot.
struct Seconds {
  double serial = 0.0;
  double transfer = 0.0;
  [[nodiscard]] double total() const { return serial + transfer; }
};

class Timer {
 public:
  Timer(const Plan& plan, const DeviceProfile& p, double compute_fraction, TrafficCount* traffic)
      : plan_(plan),
        p_(p),
        fraction_(compute_fraction),
        traffic_(traffic),
        r_(u(plan.replication_factor)) {
    if (p.is_cpu()) {
      // A CPU (config/device_profile.h host_threads): the engine runs min(R, threads)
      // threads, each whole replicas in turn (engine/exec/state.h); one replica has them
      // all for its GEMMs' column blocks.
      const double threads = p.host_threads;
      const double r = static_cast<double>(r_);
      turns_ = std::ceil(r / threads);
      collective_share_ = r / std::min(r, threads);
      gemm_threads_ = r_ == 1 ? static_cast<std::int64_t>(threads) : 1;
      if (p.gemm_spread_efficiency > 0.0) spread_efficiency_ = p.gemm_spread_efficiency;
      // io_overlapped's IO thread needs a core the compute threads leave free.
      overlap_ = r_ > 1 && r < threads;
    }
    // execution.sync_pattern (planner/sync_groups.h) at host and remote transfers: full
    // syncs every device at each, replica_and_ladder a ladder set of half of them; the
    // sets do not wait for each other, which lets them alternate on an IPU, one set
    // streaming while the other computes, so half of the devices share the link;
    // single_pipeline's device streams without waiting. On a CPU, full runs each chunk of
    // a segment with IO as a run of the engine's pool (chunk_barriers); the ladder sets
    // meet at no barrier, and their copies share the memory bus with no turns taken.
    const config::SyncPattern pattern = plan.sync_pattern;
    io_sync_ = pattern == config::SyncPattern::kSinglePipeline ? 0.0 : p.sync_overhead_seconds;
    const bool pipelined = plan.pipeline && plan.pipeline->stages.size() > 1;
    if (p.is_cpu() && r_ > 1 && !pipelined && pattern == config::SyncPattern::kFull)
      io_barrier_ = p.barrier_seconds;
    // R > 1 replicas on a CPU run each segment as a run of the engine's pool, its threads
    // asleep since the last (engine/exec/state.h on_every_replica; one replica runs inline).
    if (p.is_cpu() && r_ > 1 && !pipelined) segment_run_ = p.barrier_seconds;
    // A pipelined plan's groups meet once per cycle with a syncing transfer: on a CPU a
    // barrier of the stage threads (engine/exec/pipeline_run.cpp, run_stage).
    if (p.is_cpu() && pipelined && pattern != config::SyncPattern::kSinglePipeline)
      cycle_meeting_ = p.barrier_seconds;
    io_streams_ = static_cast<std::int64_t>(
        pattern == config::SyncPattern::kReplicaAndLadder && !p.is_cpu() ? (r_ + 1) / 2 : r_);
    // The remote store's copies: a thread copies for its replicas in turn, each cycling
    // once a step through its remote buffers, its device memory and the step's host data
    // (the memory walk's figures); the part of them that comes cold moves at the cold
    // copy rate, not the link's.
    // The optimizer's step reads and writes each weight's state once a step: what it
    // touches comes back after the same cycle, on the same ramp, at the cold element-wise
    // rate.
    const double step_cycle = p.copy_cold_fraction(
        static_cast<double>(plan.streaming_bytes + plan.peak_bytes + plan.host_bytes_per_step) *
        turns_);
    if (p.is_cpu() && p.cold_copy_bytes_per_second > 0.0)
      copy_cold_seconds_per_byte_ =
          step_cycle *
          std::max(0.0, 1.0 / p.cold_copy_bytes_per_second - 1.0 / p.streaming.rate(io_streams_));
    if (p.is_cpu() && p.cold_vector_flops_per_second > 0.0)
      optimizer_cold_seconds_per_flop_ =
          step_cycle * std::max(0.0, 1.0 / p.cold_vector_flops_per_second -
                                         1.0 / (p.vector_flops_per_second * fraction_));
  }

  // An op's time on a thread that cycles through `working_set` bytes (working_set()).
  // `accumulating`: the fraction of the op's runs that fold a gradient into the running
  // mean of its accumulators (a repeat's steps after the first).
  Seconds time(const Op& op, double working_set, double accumulating = 0.0) const {
    Seconds s = replica_time(op, working_set, accumulating);
    if (op.kind != OpKind::kRepeat && !is_collective(op)) {
      s.serial *= turns_;
      s.transfer *= turns_;
    }
    return s;
  }

  [[nodiscard]] double cycle_meeting_seconds() const { return cycle_meeting_; }
  // Whether transfers can move beside compute: on a CPU only with a core the compute
  // threads leave free for the engine's IO thread.
  [[nodiscard]] bool overlaps() const { return overlap_; }

  // What one of the CPU's threads cycles through while it runs `ops` (a repeat's body, or
  // a phase): the bytes of the distinct tensors they touch, for each replica that shares
  // the thread (R / threads of them; a lone replica spreads its GEMMs' columns over the
  // threads, each a share of the operands). 0 unless the profile prices cold operands.
  double working_set(const std::vector<Op>& ops) const {
    if ((p_.cache_cold_bytes <= 0.0 && p_.small_rows_cold_bytes <= 0.0) || !p_.is_cpu()) return 0.0;
    std::vector<bool> seen(plan_.tensors.size(), false);
    double bytes = 0.0;
    const auto add = [&](const auto& self, const std::vector<Op>& list) -> void {
      for (const Op& op : list) {
        for_each_operand(op, [&](int t) {
          const auto i = static_cast<std::size_t>(t);
          if (seen[i]) return;
          seen[i] = true;
          bytes += static_cast<double>(plan_.tensors[i].nbytes);
        });
        self(self, op.body);
      }
    };
    add(add, ops);
    return bytes * static_cast<double>(r_) / p_.host_threads;
  }

  // The runs of the pool that R > 1 replicas on a CPU make for `ops` (a phase's), each
  // waking the threads: one per segment (engine/exec/segments.cpp run_body: the local ops,
  // allocs and frees among them, between collectives and repeats); a repeat's body of
  // local ops is one segment for all its steps, as is io_overlapped's loop, and one with
  // collectives makes its segments at every step. A segment `full` cuts into chunks is
  // priced by chunk_barriers instead.
  double segment_runs(const std::vector<Op>& ops) const {
    if (segment_run_ == 0.0) return 0.0;
    return static_cast<double>(count_segment_runs(ops)) * segment_run_;
  }

  // The barriers `full` adds on a CPU (engine/exec/segments.cpp, "sync patterns"): a segment
  // (the ops between collectives and repeats) that holds a transfer runs as chunks, each
  // a run of transfers and the compute after it (allocs and frees join the part they are
  // in), ending at a barrier of the engine's threads, where the segment would otherwise
  // be one run of the pool for all its steps.
  double chunk_barriers(const std::vector<Op>& ops) const {
    if (io_barrier_ == 0.0) return 0.0;
    double runs = 0.0;
    int chunks = 0;
    bool computed = false;  // the chunk being counted has compute after its transfers
    bool has_io = false;
    auto end_segment = [&] {
      if (has_io) runs += chunks;
      chunks = 0;
      has_io = false;
    };
    for (const Op& op : ops) {
      if (ends_segment(op)) {
        end_segment();
        continue;
      }
      if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) continue;
      const bool transfer = is_io(op);
      if (chunks == 0 || (transfer && computed)) {
        ++chunks;
        computed = false;
      }
      computed = computed || !transfer;
      has_io = has_io || transfer;
    }
    end_segment();
    return runs * io_barrier_;
  }

 private:
  // The engine's segments (engine/exec/segments.cpp run_body) are the local ops between
  // collectives (slice_shard among them) and repeats.
  static bool ends_segment(const Op& op) {
    return op.kind == OpKind::kRepeat || is_collective(op) || op.kind == OpKind::kSliceShard;
  }
  std::int64_t count_segment_runs(const std::vector<Op>& ops) const {
    std::int64_t runs = 0;
    bool open = false, io = false;
    const auto close = [&] {
      if (open && !(io && io_barrier_ > 0.0)) ++runs;
      open = io = false;
    };
    for (const Op& op : ops) {
      if (!ends_segment(op)) {
        open = true;
        io = io || is_io(op);
        continue;
      }
      close();
      if (op.kind != OpKind::kRepeat) continue;
      const bool local =
          std::none_of(op.body.begin(), op.body.end(), [](const Op& o) { return ends_segment(o); });
      if (op.io_mode == IoMode::kIoOverlapped)
        runs += 1;  // the loop's steps and its IO are one run (engine run_overlapped)
      else if (local)
        runs += std::min<std::int64_t>(1, count_segment_runs(op.body));
      else
        runs += op.steps * count_segment_runs(op.body);
    }
    close();
    return runs;
  }
  static bool is_io(const Op& op) {
    return op.kind == OpKind::kHostLoad || op.kind == OpKind::kHostStore ||
           op.kind == OpKind::kRemoteLoad || op.kind == OpKind::kRemoteStore;
  }
  static bool is_collective(const Op& op) {
    return op.kind == OpKind::kAllGather || op.kind == OpKind::kReduceScatter ||
           op.kind == OpKind::kAllReduce;
  }

  // The op on one replica that has a device (or a thread) of its own.
  Seconds replica_time(const Op& op, double working_set, double accumulating) const {
    Seconds s;
    switch (op.kind) {
      case OpKind::kAlloc:
      case OpKind::kFree:
        break;  // bookkeeping: no program step on the device
      case OpKind::kRepeat:
        return repeat(op);
      case OpKind::kHostLoad:
      case OpKind::kHostStore:
        s = io_stream(p_.host, op.host_bytes);
        break;
      case OpKind::kRemoteLoad:
      case OpKind::kRemoteStore:
        s = io_stream(p_.streaming, op.remote_bytes);
        s.transfer += copy_cold_seconds_per_byte_ * static_cast<double>(op.remote_bytes);
        break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
        s.serial = p_.sync_overhead_seconds + collective(op, 1);
        break;
      case OpKind::kAllReduce:
        // GCL's all-reduce is a reduce-scatter then an all-gather: two synchronised
        // exchanges, each with its latency, moving the bytes counted for it together.
        // (On a CPU it is one run of the pool, and the segment after it another.)
        s.serial = 2 * p_.sync_overhead_seconds + collective(op, 2);
        break;
      case OpKind::kForward:
        s.serial = p_.op_overhead_seconds + compute(op.flops, gemms(op), rows(op), working_set);
        break;
      case OpKind::kBackward:
        s.serial = p_.op_overhead_seconds + backward(op, working_set, accumulating);
        break;
      case OpKind::kSend:  // over the IPU-Links between the stages' devices
        s = stream(p_.ipu_link, op.pipeline_bytes);
        break;
      case OpKind::kZero:
      case OpKind::kSliceShard:
      case OpKind::kRecv:  // the copy out of the receive buffer, on tile
        // On-tile fills and copies with no exchange: Poplar runs them within the
        // neighbouring compute sets, so they add no compute set and no sync of their own.
        break;
      case OpKind::kOptimizerStep:
        s.serial = p_.op_overhead_seconds + compute(op.flops, OpGemms{}, 0, 0.0) +
                   optimizer_cold_seconds_per_flop_ * static_cast<double>(op.flops);
        break;
      default:  // loss: element-wise
        s.serial = p_.op_overhead_seconds + compute(op.flops, OpGemms{}, 0, 0.0);
        break;
    }
    return s;
  }

  // A repeat runs its body `steps` times. io_overlapped (PopXL's overlapped IO): the
  // streams of step s+1 move while step s computes, a two-stage pipeline of n steps:
  // n * max(serial, transfer) + min(serial, transfer). Only the bytes overlap: each
  // stream's latency and sync stay on the compute side, and nothing outside the loop
  // overlaps.
  Seconds repeat(const Op& op) const {
    Seconds step;
    const double ws = working_set(op.body);
    const double accumulating =
        op.steps > 1 ? static_cast<double>(op.steps - 1) / static_cast<double>(op.steps) : 0.0;
    for (const Op& inner : op.body) {
      const Seconds t = time(inner, ws, accumulating);
      step.serial += t.serial;
      step.transfer += t.transfer;
    }
    step.serial += chunk_barriers(op.body);
    const double n = static_cast<double>(op.steps);
    Seconds s;
    if (op.io_mode == IoMode::kIoOverlapped && overlap_) {
      s.serial = n * std::max(step.serial, step.transfer) + std::min(step.serial, step.transfer);
    } else {
      s.serial = n * step.serial;
      s.transfer = n * step.transfer;
    }
    return s;
  }

  Seconds stream(const LinkProfile& link, std::uint64_t bytes) const {
    Seconds s;
    if (bytes == 0) return s;
    s.serial = p_.sync_overhead_seconds + link.latency_seconds;
    s.transfer = static_cast<double>(bytes) / link.rate(plan_.replication_factor);
    return s;
  }
  // A host or remote transfer: its sync and its share of the link as the pattern says.
  Seconds io_stream(const LinkProfile& link, std::uint64_t bytes) const {
    Seconds s;
    if (bytes == 0) return s;
    s.serial = io_sync_ + link.latency_seconds;
    s.transfer = static_cast<double>(bytes) / link.rate(io_streams_);
    return s;
  }

  // A backward. The running mean of its gradient accumulators (popxl-addons: acc =
  // s/(s+1) acc + g/(s+1)) counts kRunningMeanFlops a weight; a CPU profile that measured
  // it (accumulate_seconds) prices it as the engine runs it instead, folded into the
  // weight gradient's writes at the micro-batches after the first, over the same threads.
  double backward(const Op& op, double working_set, double accumulating) const {
    const OpGemms g = gemms(op);
    const std::uint64_t weights =
        accumulator_elements(plan_.layers[static_cast<std::size_t>(op.layer)]);
    if (!p_.is_cpu() || p_.accumulate_seconds <= 0.0 || weights == 0)
      return compute(op.flops, g, rows(op), working_set);
    const std::uint64_t mean_flops = std::min(op.flops, kRunningMeanFlops * weights);
    return compute(op.flops - mean_flops, g, rows(op), working_set) +
           accumulating * p_.accumulate_seconds * static_cast<double>(weights) *
               column_share(g.gemm[0]);
  }

  // A forward or backward's micro-batch rows: its first input's leading dimension.
  std::uint64_t rows(const Op& op) const {
    const auto& shape = plan_.tensors[static_cast<std::size_t>(op.inputs[0])].shape;
    return shape.empty() ? 1 : u(shape[0]);
  }

  OpGemms gemms(const Op& op) const {
    const LayerInfo& l = plan_.layers[static_cast<std::size_t>(op.layer)];
    return op.kind == OpKind::kForward
               ? layer_kind(l.kind).forward_gemms(l, rows(op))
               : layer_kind(l.kind).backward_gemms(l, rows(op), op.outputs[0] >= 0);
  }

  // A GEMM's fraction of the peak: the curve's, or on a CPU the small-batch kernels'
  // when the op's micro-batch has at most small_rows rows.
  double efficiency(const Gemm& m, std::uint64_t op_rows) const {
    if (small_kernels(op_rows)) return p_.gemm_small_rows_efficiency;
    return p_.gemm_efficiency(static_cast<double>(m.m), static_cast<double>(m.n),
                              static_cast<double>(m.k));
  }

  // Whether a CPU runs an op of `op_rows` micro-batch rows on its small-batch kernels.
  bool small_kernels(std::uint64_t op_rows) const {
    return p_.gemm_small_rows > 0 && op_rows > 0 &&
           static_cast<double>(op_rows) <= p_.gemm_small_rows;
  }

  // On a CPU whose thread cycles through more than its caches hold, what a GEMM waits for
  // the cold part of its weight-sized operand: the weight (forward, input gradient) or
  // the weight's gradient, m n k / rows elements of float32, at the cold rate of the
  // kernels it runs on.
  double cold_operand_seconds(const Gemm& m, std::uint64_t op_rows, double working_set) const {
    if (working_set <= 0.0 || op_rows == 0) return 0.0;
    const bool small = small_kernels(op_rows);
    const double cold =
        small ? p_.small_rows_cold_fraction(working_set) : p_.gemm_cold_fraction(working_set);
    const double rate = small ? p_.small_rows_cold_bytes_per_second : p_.cold_gemm_bytes_per_second;
    if (cold <= 0.0 || rate <= 0.0) return 0.0;
    return cold * 4.0 * static_cast<double>(m.m * m.n * m.k / op_rows) / rate;
  }

  // GEMMs at the profile's shape-dependent rate, plus what their cold operands add (above),
  // the rest element-wise; both on the compute tiles only (PopXL io_tiles are taken from
  // compute).
  double compute(std::uint64_t flops, const OpGemms& g, std::uint64_t op_rows,
                 double working_set) const {
    double seconds = 0.0;
    std::uint64_t gemm_flops = 0;
    for (int i = 0; i < g.n_gemms; ++i) {
      const Gemm& m = g.gemm[static_cast<std::size_t>(i)];
      if (m.flops() == 0) continue;
      gemm_flops += m.flops();
      const double rate = p_.flops_per_second * fraction_ * efficiency(m, op_rows);
      const double share = column_share(m);
      seconds +=
          (static_cast<double>(m.flops()) / rate + cold_operand_seconds(m, op_rows, working_set)) *
          share / (share < 1.0 ? spread_efficiency_ : 1.0);
      // The blocks' run of the pool: its threads still spin from the op or the GEMM
      // before, which ran moments ago.
      if (share < 1.0)
        seconds += p_.pool_run_seconds > 0.0 ? p_.pool_run_seconds : p_.barrier_seconds;
    }
    const std::uint64_t rest = flops > gemm_flops ? flops - gemm_flops : 0;
    if (rest > 0) seconds += static_cast<double>(rest) / (p_.vector_flops_per_second * fraction_);
    return seconds;
  }

  // The share of a GEMM's time its slowest thread takes when one replica spreads its
  // column blocks over the CPU's threads.
  double column_share(const Gemm& m) const {
    if (gemm_threads_ <= 1) return 1.0;
    return column_blocks(static_cast<std::int64_t>(m.m * m.k), static_cast<std::int64_t>(m.n))
        .busiest_share(gemm_threads_);
  }

  // `phases` synchronised exchanges, a link latency each, wherever the bytes go; then the
  // bytes, on the device links and across hosts at once.
  double collective(const Op& op, int phases) const {
    const double sync = phases * (p_.ipu_link.latency_seconds + p_.barrier_seconds);
    if (traffic_ == nullptr)
      return op.collective_bytes == 0 ? 0.0 : sync + on_host(op.collective_bytes);
    const CollectiveTraffic t = traffic_->count(op);
    if (t.on_host_bytes + t.cross_host_bytes == 0) return 0.0;
    return sync + std::max(on_host(t.on_host_bytes / r_), cross_host(t));
  }
  // Sent and received overlap on the links: half the bytes per replica.
  double on_host(std::uint64_t bytes_per_replica) const {
    return static_cast<double>(bytes_per_replica) / 2.0 / p_.ipu_link.rate(1) * collective_share_;
  }
  double cross_host(const CollectiveTraffic& t) const {
    if (t.cross_host_bytes == 0) return 0.0;
    const NetworkProfile& n = traffic_->network();
    return n.latency_seconds * static_cast<double>(t.busiest_messages) +
           static_cast<double>(t.busiest_link_bytes) / n.bytes_per_second;
  }

  const Plan& plan_;
  const DeviceProfile& p_;
  double fraction_;
  TrafficCount* traffic_;  // null: every replica on one host
  std::uint64_t r_;
  // A CPU profile's threads (all 1 and true for a device per replica): turns of the
  // replicas on the threads, the share of a collective's copies per thread, the threads
  // one replica's GEMMs use, and whether io_overlapped can overlap.
  double turns_ = 1.0;
  double collective_share_ = 1.0;
  std::int64_t gemm_threads_ = 1;
  double spread_efficiency_ = 1.0;  // of a spread GEMM's blocks, against the threads' own
  bool overlap_ = true;
  double io_sync_ = 0.0;         // sync_overhead per transfer, unless single_pipeline
  double io_barrier_ = 0.0;      // a CPU's pool run per chunk under full
  double segment_run_ = 0.0;     // a CPU's pool run per segment, R > 1
  double cycle_meeting_ = 0.0;   // a pipelined group's meeting at a cycle, on a CPU
  std::int64_t io_streams_ = 1;  // devices streaming over the host link at once
  // A CPU: what the cold part of the remote store's copies adds, per byte copied.
  double copy_cold_seconds_per_byte_ = 0.0;
  // A CPU: what the cold part of the optimizer's state adds to its step, per FLOP.
  double optimizer_cold_seconds_per_flop_ = 0.0;
};

// A phase's time: its ops one after another, except that the loads preloaded into it
// (execution.io_schedule: preload) move on the IO thread while the phase computes, so
// only their transfer beyond the phase's own time adds to it.
// phase = own + preload serial + max(0, preload bytes - own). On a CPU without a core
// for the IO thread the engine runs them in place (engine/exec/io_thread.h).
double phase_seconds(const Phase& ph, const Timer& timer) {
  double own = 0.0;
  Seconds preload;
  const double ws = timer.working_set(ph.ops);
  for (const Op& op : ph.ops) {
    const Seconds t = timer.time(op, ws);
    if (op.preload && timer.overlaps()) {
      preload.serial += t.serial;
      preload.transfer += t.transfer;
    } else {
      own += t.total();
    }
  }
  own += timer.chunk_barriers(ph.ops) + timer.segment_runs(ph.ops);
  return own + preload.serial + std::max(0.0, preload.transfer - own);
}

// A pipelined step: each stage's head (before its first slot), its forward and backward
// slots (each the longest of its kind on the stage), and its tail (the reductions and
// the optimizer, after the flush); the slots timed by the 1F1B schedule in nanoseconds.
// Stages run at once on their own devices: step = longest head + the schedule's
// makespan + longest tail. Evaluation runs forwards only: stage s starts micro-batch i
// when stage s-1 has sent it and s has finished i-1, so the makespan is
// sum_s F_s + (GA - 1) max_s F_s. Each phase's estimate is its own stage's busy time.
// Under full the devices run the pipeline's cycles in lockstep (planner/sync_groups.h):
// a cycle lasts as long as its longest slot, and the makespan is the sum of those; on a
// CPU every meeting of a group adds a barrier.
double pipelined_step_seconds(Plan& plan, const Timer& timer) {
  PipelinePlan& pp = *plan.pipeline;
  const auto S = static_cast<std::int64_t>(pp.stages.size());
  const std::int64_t ga = plan.gradient_accumulation;
  double head = 0.0, tail = 0.0;
  std::vector<std::int64_t> forward_ns, backward_ns;
  std::vector<std::vector<double>> slot_seconds;  // [phase][slot]
  bool has_backward = false;
  for (Phase& ph : plan.phases) {
    PipelineStagePlan& st = pp.stages.at(static_cast<std::size_t>(ph.stage));
    st = PipelineStagePlan{st.first_layer, st.n_layers, st.stash_depth};
    const std::int64_t first = ph.slots.empty() ? 0 : ph.slots.front().first_op;
    const std::int64_t end = ph.slots.empty() ? 0 : ph.slots.back().end_op;
    double busy = 0.0;
    const double ws = timer.working_set(ph.ops);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(ph.ops.size()); ++i) {
      const double t = timer.time(ph.ops[static_cast<std::size_t>(i)], ws).total();
      busy += t;
      if (i < first) st.head_seconds += t;
      if (i >= end) st.tail_seconds += t;
    }
    auto& times = slot_seconds.emplace_back();
    for (const StageSlot& slot : ph.slots) {
      double t = 0.0;
      for (std::int64_t i = slot.first_op; i < slot.end_op; ++i)
        t += timer.time(ph.ops[static_cast<std::size_t>(i)], ws).total();
      times.push_back(t);
      double& d = slot.work == PipelineWork::kForward ? st.forward_seconds : st.backward_seconds;
      d = std::max(d, t);
      has_backward = has_backward || slot.work == PipelineWork::kBackward;
    }
    ph.estimated_seconds = busy;
    head = std::max(head, st.head_seconds);
    tail = std::max(tail, st.tail_seconds);
  }
  const auto ns = [](double seconds) {
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(seconds * 1e9 + 0.5));
  };
  for (const PipelineStagePlan& st : pp.stages) {
    forward_ns.push_back(ns(st.forward_seconds));
    backward_ns.push_back(ns(st.backward_seconds));
  }
  pp.planned_bubble = ideal_bubble_fraction(S, ga);
  const bool alone = plan.replication_factor * S == 1;
  std::optional<PipelineCycles> cycles;
  if (plan.sync_pattern != config::SyncPattern::kSinglePipeline && !alone)
    cycles = pipeline_cycles(plan);
  double makespan = 0.0;
  if (cycles && plan.sync_pattern == config::SyncPattern::kFull) {
    // Lockstep: a cycle lasts as long as its longest slot.
    std::vector<double> longest(static_cast<std::size_t>(cycles->cycles), 0.0);
    double busy = 0.0;
    for (std::size_t p = 0; p < slot_seconds.size(); ++p)
      for (std::size_t k = 0; k < slot_seconds[p].size(); ++k) {
        double& l = longest[static_cast<std::size_t>(cycles->slot_cycle[p][k])];
        l = std::max(l, slot_seconds[p][k]);
        busy += slot_seconds[p][k];
      }
    for (const double l : longest) makespan += l;
    pp.estimated_bubble = makespan > 0 ? 1.0 - busy / (static_cast<double>(S) * makespan) : 0.0;
  } else if (has_backward) {
    const PipelineSchedule schedule = one_f_one_b(ga, forward_ns, backward_ns);
    pp.estimated_bubble = schedule.bubble_fraction();
    makespan = static_cast<double>(schedule.makespan) * 1e-9;
  } else {
    double sum = 0.0, most = 0.0;
    for (const PipelineStagePlan& st : pp.stages) {
      sum += st.forward_seconds;
      most = std::max(most, st.forward_seconds);
    }
    makespan = sum + static_cast<double>(ga - 1) * most;
    pp.estimated_bubble =
        makespan > 0 ? 1.0 - static_cast<double>(ga) * sum / (static_cast<double>(S) * makespan)
                     : 0.0;
  }
  if (cycles) {
    std::size_t meetings = 0;
    for (const auto& m : cycles->meetings) meetings = std::max(meetings, m.cycles.size());
    makespan += static_cast<double>(meetings) * timer.cycle_meeting_seconds();
  }
  return head + makespan + tail;
}

}  // namespace

void annotate_costs(Plan& plan) {
  Costs costs(plan);
  for (Op& op : plan.setup) costs.annotate(op);
  for (Phase& ph : plan.phases)
    for (Op& op : ph.ops) costs.annotate(op);
}

CollectiveTraffic collective_traffic(const Plan& plan, const Op& op,
                                     const NetworkProfile& network) {
  TrafficCount count(plan, network);
  return count.count(op);
}

void estimate_time(Plan& plan, const DeviceProfile& profile, const NetworkProfile* network) {
  const std::int64_t io_tiles = plan.io_tiles;
  // IO tiles stream data; the rest compute (PopXL io_tiles).
  double fraction = 1.0;
  if (plan.io_mode != IoMode::kCompute && io_tiles > 0 && io_tiles < profile.tiles)
    fraction = static_cast<double>(profile.tiles - io_tiles) / static_cast<double>(profile.tiles);
  const auto step_seconds = [&](TrafficCount* traffic) {
    const Timer timer(plan, profile, fraction, traffic);
    if (plan.pipeline) return pipelined_step_seconds(plan, timer);
    double step = 0.0;
    for (Phase& ph : plan.phases) {
      ph.estimated_seconds = phase_seconds(ph, timer);
      step += ph.estimated_seconds;
    }
    return step;
  };
  plan.network.reset();
  plan.estimated_step_seconds = step_seconds(nullptr);
  if (network != nullptr) {
    // The step on one host first: what the network adds is the difference.
    const double one_host = plan.estimated_step_seconds;
    TrafficCount traffic(plan, *network);
    plan.estimated_step_seconds = step_seconds(&traffic);
    NetworkEstimate n;
    n.replicas_per_host = network->replicas_per_host;
    n.n_hosts = network->n_hosts(plan.replication_factor);
    n.bytes_per_second = network->bytes_per_second;
    n.latency_seconds = network->latency_seconds;
    CollectiveTraffic sum;
    for (const Phase& ph : plan.phases)
      for (const Op& op : ph.ops) {
        const CollectiveTraffic t = traffic.count(op);
        sum.on_host_bytes += t.on_host_bytes;
        sum.cross_host_bytes += t.cross_host_bytes;
        sum.busiest_link_bytes += t.busiest_link_bytes;
        sum.busiest_messages += t.busiest_messages;
      }
    const std::uint64_t r = u(plan.replication_factor);
    n.on_host_bytes = sum.on_host_bytes / r;
    n.cross_host_bytes = sum.cross_host_bytes / r;
    n.network_bytes = sum.cross_host_bytes / 2;
    n.busiest_link_bytes = sum.busiest_link_bytes;
    n.messages = sum.busiest_messages;
    n.seconds = plan.estimated_step_seconds - one_host;
    plan.network = n;
  }
  plan.estimated_samples_per_second =
      plan.estimated_step_seconds > 0
          ? static_cast<double>(plan.global_batch_size) / plan.estimated_step_seconds
          : 0.0;
}

}  // namespace popkit::planner
