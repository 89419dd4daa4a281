// An op's estimated time on a device profile (op_timer.h).
#include "planner/op_timer.h"

#include <algorithm>
#include <cmath>

#include "planner/element_blocks.h"
#include "planner/layer_ops.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"
#include "planner/workspace.h"

namespace popkit::planner {
namespace {

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

}  // namespace

Timer::Timer(const Plan& plan, const DeviceProfile& p, double compute_fraction,
             TrafficCount* traffic, const Schedule& schedule)
    : plan_(plan),
      p_(p),
      fraction_(compute_fraction),
      traffic_(traffic),
      schedule_(schedule),
      r_(u(plan.replication_factor)),
      cpu_(p.is_cpu()) {
  if (cpu_) {
    // A CPU (config/device_profile.h host_threads): the engine runs min(R, threads)
    // threads, each whole replicas in turn; one replica has them all for its GEMMs'
    // column blocks (Schedule::spread_gemms).
    const double threads = p.host_threads;
    const double r = static_cast<double>(r_);
    turns_ = std::ceil(r / threads);
    collective_share_ = r / std::min(r, threads);
    gemm_threads_ = schedule.spread_gemms ? schedule.run.threads : 1;
    if (p.gemm_spread_efficiency > 0.0) spread_efficiency_ = p.gemm_spread_efficiency;
    // The engine's waits (planner/schedule.h): a run of its pool, the threads asleep
    // since the last, or a barrier of them; a run of a ladder set's pool, its threads
    // still spinning from the part before.
    pool_wait_ = p.barrier_seconds;
    full_ = plan.sync_pattern == config::SyncPattern::kFull;
    lane_run_ = p.pool_run_seconds > 0.0 ? p.pool_run_seconds : p.barrier_seconds;
  }
  // execution.sync_pattern (planner/sync_groups.h) at host and remote transfers: full
  // syncs every device at each, replica_and_ladder a ladder set of half of them; the
  // sets do not wait for each other, which lets them alternate on an IPU, one set
  // streaming while the other computes, so half of the devices share the link;
  // single_pipeline's device streams without waiting. On a CPU the engine's threads wait
  // where the schedule says (list_waits); the ladder sets' copies share the memory bus
  // with no turns taken.
  const config::SyncPattern pattern = plan.sync_pattern;
  io_sync_ = pattern == config::SyncPattern::kSinglePipeline ? 0.0 : p.sync_overhead_seconds;
  // A pipelined plan's groups meet once per cycle with a syncing transfer: on a CPU a
  // barrier of the stage threads (engine/exec/pipeline_run.cpp, run_stage).
  if (cpu_ && schedule.stage_workers && pattern != config::SyncPattern::kSinglePipeline)
    cycle_meeting_ = p.barrier_seconds;
  io_streams_ = static_cast<std::int64_t>(
      pattern == config::SyncPattern::kReplicaAndLadder && !cpu_ ? (r_ + 1) / 2 : r_);
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
  if (cpu_ && p.cold_copy_bytes_per_second > 0.0)
    copy_cold_seconds_per_byte_ =
        step_cycle *
        std::max(0.0, 1.0 / p.cold_copy_bytes_per_second - 1.0 / p.streaming.rate(io_streams_));
  if (cpu_ && p.cold_vector_flops_per_second > 0.0)
    optimizer_cold_seconds_per_flop_ =
        step_cycle * std::max(0.0, 1.0 / p.cold_vector_flops_per_second -
                                       1.0 / (p.vector_flops_per_second * fraction_));
}

// The engine's waits in a list of ops run once (a phase): full's barriers at its
// segments, the runs of the pool (counted over the repeats' bodies too), and the ladder
// sets' runs of their pools; a repeat's barriers each step are in its time (repeat()).
double Timer::list_waits(const std::vector<Op>& ops, const OpsSchedule& list) const {
  double barriers = 0.0, lane_runs = 0.0;
  for (const ScheduleItem& item : list.items)
    if (item.kind == ScheduleItem::Kind::kSegment) {
      barriers += segment_barriers(item);
      lane_runs += segment_lane_runs(item);
    }
  const double runs = static_cast<double>(pool_runs(ops, list, 1, false));
  const double seconds = barriers * pool_wait_ + runs * pool_wait_;
  return lane_runs > 0.0 ? seconds + lane_runs * lane_run_ : seconds;
}

// Under full, the barriers of a segment each time it runs: its lanes meet after each
// chunk; a segment of one chunk runs as one run of the pool, priced as that chunk's
// barrier.
double Timer::segment_barriers(const ScheduleItem& segment) const {
  return full_ && !segment.chunks.empty() ? static_cast<double>(segment.chunks.size()) : 0.0;
}

// replica_and_ladder with more than one thread a set: a run of the set's pool for each
// part of each chunk (its transfers, then its compute), each time the segment runs.
double Timer::segment_lane_runs(const ScheduleItem& segment) const {
  if (segment.run != SegmentRun::kLadder || schedule_.lane_threads <= 1) return 0.0;
  double runs = 0.0;
  for (const SyncChunk& c : segment.chunks) runs += c.io() ? 2.0 : 1.0;
  return runs;
}

// The runs of the pool of a list run `steps` times: a segment of R > 1 replicas is one
// each time it runs, but full's, whose barriers price them; a repeat's body of local ops
// is one segment for all its steps (`across`: the list is such a body), one run; an
// io_overlapped loop on the IO thread is one.
std::int64_t Timer::pool_runs(const std::vector<Op>& ops, const OpsSchedule& list,
                              std::int64_t steps, bool across) const {
  auto pooled = [](SegmentRun run) {
    return run == SegmentRun::kPool || run == SegmentRun::kLadder;
  };
  std::int64_t runs = 0;
  if (across) {
    for (const ScheduleItem& item : list.items) runs += pooled(item.run) ? 1 : 0;
    return runs;
  }
  for (const ScheduleItem& item : list.items) {
    if (item.kind == ScheduleItem::Kind::kSegment)
      runs += pooled(item.run) && segment_barriers(item) == 0.0 ? 1 : 0;
    else if (item.kind == ScheduleItem::Kind::kRepeat && item.io_thread)
      runs += pooled(item.run) ? 1 : 0;
    else if (item.kind == ScheduleItem::Kind::kRepeat)
      runs += pool_runs(ops[item.first].body, item.body.front(), ops[item.first].steps,
                        item.body.front().across_steps);
  }
  return steps * runs;
}

// A repeat runs its body `steps` times. io_overlapped (PopXL's overlapped IO): the
// streams of step s+1 move while step s computes, a two-stage pipeline of n steps:
// n * max(serial, transfer) + min(serial, transfer). Only the bytes overlap: each
// stream's latency and sync stay on the compute side, and nothing outside the loop
// overlaps. On a CPU it overlaps only where the schedule gives the loop the engine's IO
// thread, and the engine's barriers and ladder runs each step are the schedule's (its
// runs of the pool are counted with the phase's, list_waits).
Seconds Timer::repeat(const Op& op, const ScheduleItem* item) const {
  Seconds step;
  const double ws = working_set(op.body);
  const double accumulating =
      op.steps > 1 ? static_cast<double>(op.steps - 1) / static_cast<double>(op.steps) : 0.0;
  for (const Op& inner : op.body) {
    const Seconds t = time(inner, ws, accumulating);
    step.serial += t.serial;
    step.transfer += t.transfer;
  }
  const bool io_thread = item != nullptr && item->io_thread;
  if (item != nullptr && !io_thread) {
    double barriers = 0.0, lane_runs = 0.0;
    const OpsSchedule& body = item->body.front();
    for (const ScheduleItem& segment : body.items) {
      if (segment.kind != ScheduleItem::Kind::kSegment) continue;
      // One segment for all the steps: one run of the pool, and full's barriers only
      // when it has several chunks.
      if (!body.across_steps || segment.run == SegmentRun::kLockstep)
        barriers += segment_barriers(segment);
      lane_runs += segment_lane_runs(segment);
    }
    step.serial += barriers * pool_wait_;
    if (lane_runs > 0.0) step.serial += lane_runs * lane_run_;
  }
  const double n = static_cast<double>(op.steps);
  Seconds s;
  if (op.io_mode == IoMode::kIoOverlapped && (!cpu_ || io_thread)) {
    s.serial = n * std::max(step.serial, step.transfer) + std::min(step.serial, step.transfer);
  } else {
    s.serial = n * step.serial;
    s.transfer = n * step.transfer;
  }
  return s;
}

Seconds Timer::time(const Op& op, double working_set, double accumulating,
                    const ScheduleItem* item) const {
  Seconds s = replica_time(op, working_set, accumulating, item);
  if (is_local(op)) {
    s.serial *= turns_;
    s.transfer *= turns_;
  }
  return s;
}

double Timer::working_set(const std::vector<Op>& ops) const {
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

// The op on one replica that has a device (or a thread) of its own.
Seconds Timer::replica_time(const Op& op, double working_set, double accumulating,
                            const ScheduleItem* item) const {
  Seconds s;
  switch (op.kind) {
    case OpKind::kAlloc:
    case OpKind::kFree:
      break;  // bookkeeping: no program step on the device
    case OpKind::kRepeat:
      return repeat(op, item);
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
    case OpKind::kOptimizerStep: {
      const int weight = optimizer_operand(op, plan_.optimizer, OperandRole::kParam);
      const std::int64_t elements =
          weight >= 0 ? plan_.tensors[static_cast<std::size_t>(weight)].nelms : 0;
      s.serial =
          p_.op_overhead_seconds + element_spread(elements, compute(op.flops, OpGemms{}, 0, 0.0) +
                                                                optimizer_cold_seconds_per_flop_ *
                                                                    static_cast<double>(op.flops));
      break;
    }
    default:  // loss: element-wise
      s.serial = p_.op_overhead_seconds + compute(op.flops, OpGemms{}, 0, 0.0);
      break;
  }
  return s;
}

Seconds Timer::stream(const LinkProfile& link, std::uint64_t bytes) const {
  Seconds s;
  if (bytes == 0) return s;
  s.serial = p_.sync_overhead_seconds + link.latency_seconds;
  s.transfer = static_cast<double>(bytes) / link.rate(plan_.replication_factor);
  return s;
}

// A host or remote transfer: its sync and its share of the link as the pattern says.
Seconds Timer::io_stream(const LinkProfile& link, std::uint64_t bytes) const {
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
double Timer::backward(const Op& op, double working_set, double accumulating) const {
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
std::uint64_t Timer::rows(const Op& op) const {
  const auto& shape = plan_.tensors[static_cast<std::size_t>(op.inputs[0])].shape;
  return shape.empty() ? 1 : u(shape[0]);
}

OpGemms Timer::gemms(const Op& op) const {
  const LayerInfo& l = plan_.layers[static_cast<std::size_t>(op.layer)];
  return op.kind == OpKind::kForward
             ? layer_kind(l.kind).forward_gemms(l, rows(op))
             : layer_kind(l.kind).backward_gemms(l, rows(op), op.outputs[0] >= 0);
}

// A GEMM's fraction of the peak: the curve's, or on a CPU the small-batch kernels'
// when the op's micro-batch has at most small_rows rows.
double Timer::efficiency(const Gemm& m, std::uint64_t op_rows) const {
  if (small_kernels(op_rows)) return p_.gemm_small_rows_efficiency;
  return p_.gemm_efficiency(static_cast<double>(m.m), static_cast<double>(m.n),
                            static_cast<double>(m.k));
}

// Whether a CPU runs an op of `op_rows` micro-batch rows on its small-batch kernels.
bool Timer::small_kernels(std::uint64_t op_rows) const {
  return p_.gemm_small_rows > 0 && op_rows > 0 &&
         static_cast<double>(op_rows) <= p_.gemm_small_rows;
}

// On a CPU whose thread cycles through more than its caches hold, what a GEMM waits for
// the cold part of its weight-sized operand: the weight (forward, input gradient) or
// the weight's gradient, m n k / rows elements of float32, at the cold rate of the
// kernels it runs on.
double Timer::cold_operand_seconds(const Gemm& m, std::uint64_t op_rows, double working_set) const {
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
double Timer::compute(std::uint64_t flops, const OpGemms& g, std::uint64_t op_rows,
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
double Timer::column_share(const Gemm& m) const {
  if (gemm_threads_ <= 1) return 1.0;
  const auto rows = static_cast<std::int64_t>(m.m), inner = static_cast<std::int64_t>(m.k),
             cols = static_cast<std::int64_t>(m.n);
  return (m.row_tiles ? gemm_tiles(rows, inner, cols) : column_blocks(rows * inner, cols))
      .busiest_share(gemm_threads_);
}

// An element-wise pass of `seconds` on one thread, cut into element blocks
// (planner/element_blocks.h) that one replica spreads over the CPU's threads: its
// busiest thread's share, at the spread rate, and a run of the pool.
double Timer::element_spread(std::int64_t elements, double seconds) const {
  if (gemm_threads_ <= 1) return seconds;
  const double share = element_blocks(elements).busiest_share(gemm_threads_);
  if (share >= 1.0) return seconds;
  return seconds * share / spread_efficiency_ +
         (p_.pool_run_seconds > 0.0 ? p_.pool_run_seconds : p_.barrier_seconds);
}

// `phases` synchronised exchanges, a link latency each, wherever the bytes go; then the
// bytes, on the device links and across hosts at once.
double Timer::collective(const Op& op, int phases) const {
  const double sync = phases * (p_.ipu_link.latency_seconds + p_.barrier_seconds);
  if (traffic_ == nullptr)
    return op.collective_bytes == 0 ? 0.0 : sync + on_host(op.collective_bytes);
  const CollectiveTraffic t = traffic_->count(op);
  if (t.on_host_bytes + t.cross_host_bytes == 0) return 0.0;
  return sync + std::max(on_host(t.on_host_bytes / r_), cross_host(t));
}

// Sent and received overlap on the links: half the bytes per replica.
double Timer::on_host(std::uint64_t bytes_per_replica) const {
  return static_cast<double>(bytes_per_replica) / 2.0 / p_.ipu_link.rate(1) * collective_share_;
}

double Timer::cross_host(const CollectiveTraffic& t) const {
  if (t.cross_host_bytes == 0) return 0.0;
  const NetworkProfile& n = traffic_->network();
  return n.latency_seconds * static_cast<double>(t.busiest_messages) +
         static_cast<double>(t.busiest_link_bytes) / n.bytes_per_second;
}

}  // namespace popkit::planner
