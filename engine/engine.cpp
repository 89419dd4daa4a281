// The plan interpreter: replicas, op dispatch, repeat loops (inline or with the IO
// thread of io_overlapped), memory sampling, timing, variable access and evaluation.
#include "engine/engine.h"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "engine/kernels/kernels.h"
#include "engine/layer_kinds.h"
#include "engine/runtime/aligned_block.h"
#include "engine/runtime/float_mode.h"
#include "engine/runtime/memory_account.h"
#include "engine/runtime/remote_store.h"
#include "engine/runtime/thread_pool.h"
#include "engine/runtime/world.h"
#include "engine/tensor/init.h"
#include "engine/tensor/layers.h"
#include "engine/tensor/optimizer.h"
#include "planner/device_layout.h"
#include "planner/names.h"
#include "planner/operands.h"
#include "planner/sync_groups.h"
#include "planner/workspace.h"

namespace popkit::engine {

using planner::DeviceTensor;
using planner::Op;
using planner::OpKind;
using planner::Plan;
using planner::Stream;
using planner::Variable;
using planner::VariableRole;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string shape_str(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

OpCategory category(OpKind k) {
  switch (k) {
    case OpKind::kAlloc:
    case OpKind::kFree:
      return OpCategory::kMemory;
    case OpKind::kRemoteLoad:
    case OpKind::kRemoteStore:
      return OpCategory::kRemote;
    case OpKind::kHostLoad:
    case OpKind::kHostStore:
      return OpCategory::kHostIo;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllReduce:
    case OpKind::kSliceShard:
      return OpCategory::kCollective;
    case OpKind::kSend:
    case OpKind::kRecv:
      return OpCategory::kPipeline;
    default:
      return OpCategory::kCompute;
  }
}

// Pipelined execution: a receive buffer's hand-over between two stage workers of one
// replica. The sender waits until the receiver has taken the previous contents, copies
// into the buffer and marks it full; the receiver waits until it is full, copies out and
// marks it empty. The copies happen under the lock, so the data is ordered with the flag.
// `abort` ends every wait when a worker failed.
struct Mailbox {
  std::mutex mutex;
  std::condition_variable changed;
  bool full = false;
};

// The stage workers of one stage meet here around a collective (all replicas' buffers of
// that stage, run by one of them); abortable like the mailboxes.
class StageBarrier {
 public:
  explicit StageBarrier(std::int64_t n) : n_(n) {}
  // False when aborted.
  bool arrive_and_wait(const std::atomic<bool>& abort) {
    std::unique_lock lock(mutex_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return !abort.load();
    }
    changed_.wait(lock, [&] { return generation_ != generation || abort.load(); });
    return generation_ != generation;
  }
  void wake() {
    std::lock_guard lock(mutex_);
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t n_;
  std::int64_t arrived_ = 0;
  std::uint64_t generation_ = 0;
};

bool is_collective(OpKind k) {
  return category(k) == OpCategory::kCollective;
}

}  // namespace

struct Engine::Impl {
  struct Replica {
    // The replica's device memory, one block (planner/device_layout.h): a tensor lives at
    // the offset first fit gives its alloc, so the step loop neither allocates nor faults
    // pages in, and the bytes a phase touches are about its planned peak.
    AlignedBlock block;
    std::optional<planner::FirstFit> fit;
    std::vector<std::byte*> tensors;  // by plan tensor index, in `block`; null when not live
    MemoryAccount account;
    PhaseSampler sampler;
    std::unique_ptr<RemoteStore> store;
    std::vector<double> losses;              // per accumulation step
    std::vector<std::vector<float>> logits;  // per repeat step (evaluation plans)
    // Time of this replica's ops in the current segment, by category (its own thread).
    std::array<double, kNumOpCategories> segment_seconds{};
    // execution.io_schedule: preload, on the IO thread: this replica's piece of the
    // phase's preload loads is in flight, and the time it took (written by the IO thread
    // before the wait that reads it).
    bool preload_posted = false;
    double preload_seconds = 0.0;
    std::exception_ptr error;  // the first failure in the current segment ...
    std::size_t error_at = 0;  // ... and its position (step-major, then op)
    // Updated by compute threads and the IO thread: relaxed atomics.
    std::atomic<std::uint64_t> host_in{0}, host_out{0}, remote_in{0}, remote_out{0};
  };

  Plan plan;
  EngineOptions options;
  std::int64_t n_replicas = 1;  // R, over every rank
  // The processes of the run, and the replicas this one hosts (engine/runtime/world.h):
  // `replicas` holds those, replica r at r - hosted.first.
  std::shared_ptr<World> world;
  HostedReplicas hosted;
  std::uint64_t block_bytes = 0;  // each replica's device memory block
  std::unique_ptr<ThreadPool> pool;
  // One replica with several threads: a layer's GEMMs split over column blocks on the
  // pool. With R > 1 the threads run replicas instead (one per core).
  bool intra_op = false;
  // replica_and_ladder: each ladder set's pool when a set has more than one thread.
  std::array<std::unique_ptr<ThreadPool>, 2> lane_pools;
  // The machine's cores, read once: std::thread::hardware_concurrency reads a file in
  // /sys on every call, and a phased step asks once per repeat.
  int n_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::size_t current_phase = 0;  // the phase being run, for per-phase timings
  std::unique_ptr<IoQueue> io;    // io_overlapped and preload, made at first use
  // Per phase, its preload loads (top-level ops marked preload) and their bytes; whether
  // the current phase runs them on the IO thread, and that thread's job for them.
  std::vector<std::vector<const Op*>> preloads;
  std::vector<std::uint64_t> preload_bytes;
  bool preload_on_io_thread = false;
  std::function<void(std::int64_t)> preload_job;
  std::shared_ptr<Collectives> collectives;
  // `replicas` holds the hosted replicas' devices: one each, or with a pipelined plan
  // one per stage, replica r's stage s at (r - hosted.first) * n_stages + s.
  std::vector<std::unique_ptr<Replica>> replicas;
  // Pipelined: the stages, each stage's collectives among the same stage of every
  // replica, the receive buffers' hand-overs, and the first worker failure.
  std::int64_t n_stages = 1;
  std::vector<std::shared_ptr<Collectives>> stage_collectives;
  std::vector<std::unique_ptr<StageBarrier>> stage_barriers;
  std::vector<std::unique_ptr<Mailbox>> mailboxes;
  std::atomic<bool> abort{false};
  // Pipelined under a sync pattern: the cycles, a barrier per meeting group, and the
  // group meetings of this step.
  std::optional<planner::PipelineCycles> cycles;
  std::vector<std::unique_ptr<StageBarrier>> cycle_barriers;
  std::atomic<std::int64_t> cycle_meetings{0};
  std::optional<OptimizerKernel> optimizer;
  // The hot loops for this CPU (engine/kernels): chosen once per process.
  const Kernels& kern = kernels();
  std::int64_t steps_done = 0;
  std::int64_t image_size = 1;
  Timings timings;
  std::vector<std::vector<planner::PhaseMemory>> phase_memory;
  std::vector<std::vector<double>> last_losses;
  // Variables by name, built once: checkpoints read and write every variable by name.
  std::unordered_map<std::string, int> variable_index;

  // The op being run, for error messages.
  const BatchSource* batches = nullptr;
  std::string where = "setup";

  Impl(Plan p, EngineOptions o) : plan(std::move(p)), options(std::move(o)) {
    variable_index.reserve(plan.variables.size());
    for (std::size_t i = 0; i < plan.variables.size(); ++i)  // the first of a name wins
      variable_index.emplace(plan.variables[i].name, static_cast<int>(i));
  }

  // Replica r (a global index), hosted by this process.
  Replica& replica(std::int64_t r) const {
    POPKIT_ASSERT(hosted.hosts(r) && n_stages == 1);
    return *replicas[static_cast<std::size_t>(r - hosted.first)];
  }
  // Replica r's device of stage s (s = 0 without pipelining).
  Replica& device(std::int64_t r, std::int64_t s) const {
    POPKIT_ASSERT(hosted.hosts(r) && s >= 0 && s < n_stages);
    return *replicas[static_cast<std::size_t>((r - hosted.first) * n_stages + s)];
  }
  // The device of replica r that holds tensor t.
  Replica& holder(std::int64_t r, int t) const { return device(r, std::max(0, tensor(t).stage)); }
  std::int64_t local(std::int64_t r) const { return r - hosted.first; }

  // ---- the layer kinds' view (engine/layer_kinds.h) -----------------------------------

  class Checks final : public OpChecks {
   public:
    Checks(const Impl& m, const Op& op) : m_(m), op_(op) {}
    std::int64_t rows(int t, const char* what) const override { return m_.rows_of(t, op_, what); }
    void shape(int t, const std::vector<std::int64_t>& want, const char* what) const override {
      m_.need_shape(t, op_, want, what);
    }
    [[noreturn]] void fail(const std::string& message) const override {
      throw Error("plan: {}, op '{}': {}", m_.where, op_.label, message);
    }

   private:
    const Impl& m_;
    const Op& op_;
  };

  // Replica r at repeat step s holds the global batch's samples (s R + r) B + i (the host
  // arrays' layout, engine/data/batch_source.h).
  class Run final : public OpRun {
   public:
    Run(Impl& m, Replica& rep, const Op& op, std::int64_t r, std::int64_t s)
        : m_(m), rep_(rep), op_(op), s_(s) {
      seed = m.plan.seed;
      optimizer_step = m.steps_done + 1;
      first_sample = (s * m.n_replicas + r) * m.plan.micro_batch_size;
      repeat_step = s;
    }
    float* f32(int t) const override { return m_.f32(rep_, t, s_, op_); }
    std::int64_t rows(int t) const override { return m_.tensor(t).shape[0]; }
    void in_column_blocks(
        std::int64_t rows_x_inner, std::int64_t n_cols,
        const std::function<void(std::int64_t, std::int64_t)>& fn) const override {
      m_.in_column_blocks(rows_x_inner, n_cols, fn);
    }
    const Kernels& kernels() const override { return m_.kern; }
    float* workspace() const override {
      return op_.workspace >= 0 ? m_.f32(rep_, op_.workspace, s_, op_) : nullptr;
    }
    std::uint64_t workspace_bytes() const override {
      return op_.workspace >= 0 ? m_.tensor(op_.workspace).nbytes : 0;
    }

   private:
    Impl& m_;
    Replica& rep_;
    const Op& op_;
    std::int64_t s_;
  };

  // ---- plan checks -------------------------------------------------------------------

  const DeviceTensor& tensor(int t) const { return plan.tensors[static_cast<std::size_t>(t)]; }

  void check_plan() {
    if (!plan.fits) {
      const auto& nf = plan.not_fitting;
      throw Error(
          "plan '{}' does not fit device memory ({} bytes per replica): phase '{}' needs {} bytes "
          "more; largest tensors: {}; suggestions: {}",
          plan.name, plan.memory_per_replica, nf.phase, nf.bytes_over, fmt::join(nf.largest, ", "),
          fmt::join(nf.suggestions, "; "));
    }
    if (plan.replication_factor < 1)
      throw Error("plan: replication factor {} < 1", plan.replication_factor);
    if (plan.pipeline && !plan.buffers.empty())
      throw Error("plan '{}' is pipelined with remote buffers, which its stages do not share",
                  plan.name);
    image_size = std::accumulate(plan.input_shape.begin(), plan.input_shape.end(), std::int64_t{1},
                                 std::multiplies<>());
    for (const auto& t : plan.tensors) {
      const std::int64_t n =
          std::accumulate(t.shape.begin(), t.shape.end(), std::int64_t{1}, std::multiplies<>());
      if (n != t.nelms ||
          t.nbytes != static_cast<std::uint64_t>(t.nelms * planner::dtype_size(t.dtype)))
        throw Error("plan: tensor '{}' has shape {} ({} elements) but nelms {} and nbytes {}",
                    t.name, shape_str(t.shape), n, t.nelms, t.nbytes);
    }
    where = "setup";
    for (const Op& op : plan.setup) check_op(op);
    for (const auto& ph : plan.phases) {
      where = fmt::format("phase '{}'", ph.name);
      for (const Op& op : ph.ops) check_op(op);
    }
    where = "setup";
  }

  void need_index(int t, const Op& op, const char* field) const {
    if (t < 0 || static_cast<std::size_t>(t) >= plan.tensors.size())
      throw Error("plan: {}, op '{}' ({}): {} is tensor {}, out of range", where, op.label,
                  planner::op_kind_name(op.kind), field, t);
  }

  // The tensor `t` must have shape `want` (and be float32).
  void need_shape(int t, const Op& op, const std::vector<std::int64_t>& want,
                  const char* what) const {
    need_index(t, op, what);
    const auto& d = tensor(t);
    if (d.shape != want)
      throw Error("plan: {}, op '{}' ({}): tensor '{}' has shape {} but {} needs {}", where,
                  op.label, planner::op_kind_name(op.kind), d.name, shape_str(d.shape), what,
                  shape_str(want));
    if (d.dtype != planner::DType::kFloat32)
      throw Error("plan: {}, op '{}': tensor '{}' must be float32", where, op.label, d.name);
  }

  const planner::LayerInfo& layer_of(const Op& op) const {
    if (op.layer < 0 || static_cast<std::size_t>(op.layer) >= plan.layers.size())
      throw Error("plan: {}, op '{}': layer {} out of range", where, op.label, op.layer);
    return plan.layers[static_cast<std::size_t>(op.layer)];
  }

  std::int64_t rows_of(int t, const Op& op, const char* what) const {
    need_index(t, op, what);
    const auto& d = tensor(t);
    if (d.shape.size() != 2)
      throw Error("plan: {}, op '{}': tensor '{}' has shape {}, {} needs a matrix", where, op.label,
                  d.name, shape_str(d.shape), what);
    return d.shape[0];
  }

  void check_op(const Op& op) {
    namespace lo = planner::loss_operand;
    namespace oo = planner::optimizer_operand;
    namespace so = planner::shard_operand;
    // The positions of the op's kind, every operand a tensor of the plan.
    const planner::OpSignature sig = planner::op_signature(op, plan);
    if (const std::string error = planner::operand_count_error(op, plan); !error.empty())
      throw Error("plan: {}, op '{}': {}", where, op.label, error);
    auto positions = [&](const std::vector<int>& got, std::span<const std::string_view> want) {
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] >= 0) need_index(got[i], op, std::string(want[i]).c_str());
    };
    positions(op.inputs, sig.inputs);
    positions(op.outputs, sig.outputs);
    positions(op.state, sig.state);
    switch (op.kind) {
      case OpKind::kAlloc:
      case OpKind::kFree:
      case OpKind::kZero:
      case OpKind::kAllReduce:
        need_index(planner::the_tensor(op), op, "tensor");
        break;
      case OpKind::kRemoteLoad:
      case OpKind::kRemoteStore: {
        const int t = planner::the_tensor(op);
        need_index(t, op, "tensor");
        if (op.buffer < 0 || static_cast<std::size_t>(op.buffer) >= plan.buffers.size())
          throw Error("plan: {}, op '{}': remote buffer {} out of range", where, op.label,
                      op.buffer);
        const auto& b = plan.buffers[static_cast<std::size_t>(op.buffer)];
        if (tensor(t).nbytes != b.entry_bytes)
          throw Error(
              "plan: {}, op '{}': tensor '{}' has {} bytes but remote buffer '{}' has entries of "
              "{}",
              where, op.label, tensor(t).name, tensor(t).nbytes, b.name, b.entry_bytes);
        break;
      }
      case OpKind::kHostLoad: {
        const std::int64_t mb = plan.micro_batch_size;
        const int t = planner::the_tensor(op);
        if (op.stream == Stream::kImages)
          need_shape(t, op, {mb, image_size}, "the images stream");
        else if (op.stream == Stream::kLabels)
          need_shape(t, op, {mb}, "the labels stream");
        else
          throw Error("plan: {}, op '{}': host_load of the loss stream", where, op.label);
        break;
      }
      case OpKind::kHostStore: {
        const int t = planner::the_tensor(op);
        need_index(t, op, "tensor");
        if (op.stream == Stream::kLogits) {
          need_shape(t, op, {plan.micro_batch_size, plan.n_classes}, "the logits stream");
          break;
        }
        if (op.stream != Stream::kLoss || tensor(t).nelms != 1)
          throw Error("plan: {}, op '{}': host_store takes the 1-element loss or the logits", where,
                      op.label);
        break;
      }
      case OpKind::kAllGather: {
        const int src = op.inputs[so::kSrc], dst = op.outputs[so::kDst];
        need_index(src, op, "src");
        need_index(dst, op, "dst");
        if (tensor(dst).nelms > tensor(src).nelms * op.grouping.group_size)
          throw Error("plan: {}, op '{}': all_gather of '{}' ({} x {}) cannot fill '{}' ({})",
                      where, op.label, tensor(src).name, op.grouping.group_size, tensor(src).nelms,
                      tensor(dst).name, tensor(dst).nelms);
        break;
      }
      case OpKind::kReduceScatter:
      case OpKind::kSliceShard: {
        const int src = op.inputs[so::kSrc], dst = op.outputs[so::kDst];
        need_index(src, op, "src");
        need_index(dst, op, "dst");
        const auto& g = op.kind == OpKind::kSliceShard ? op.grouping : op.shard_grouping;
        if (tensor(dst).nelms * g.group_size < tensor(src).nelms)
          throw Error("plan: {}, op '{}': {} shards of {} elements cannot hold '{}' ({} elements)",
                      where, op.label, g.group_size, tensor(dst).nelms, tensor(src).name,
                      tensor(src).nelms);
        break;
      }
      case OpKind::kForward: {
        const auto& l = layer_of(op);
        layer_kernel(l.kind).check_forward(op, l, Checks(*this, op));
        break;
      }
      case OpKind::kLoss: {
        const int logits = op.inputs[lo::kLogits], loss = op.outputs[lo::kLoss];
        const std::int64_t n = rows_of(logits, op, "the logits");
        need_shape(logits, op, {n, plan.n_classes}, "the logits");
        need_shape(op.inputs[lo::kLabels], op, {n}, "the labels");
        need_shape(op.outputs[lo::kDlogits], op, {n, plan.n_classes}, "the logits' gradient");
        need_index(loss, op, "loss");
        if (tensor(loss).nelms != 1)
          throw Error("plan: {}, op '{}': the loss '{}' has {} elements, not 1", where, op.label,
                      tensor(loss).name, tensor(loss).nelms);
        break;
      }
      case OpKind::kBackward: {
        const auto& l = layer_of(op);
        layer_kernel(l.kind).check_backward(op, l, Checks(*this, op));
        break;
      }
      case OpKind::kOptimizerStep: {
        const int weight = op.state[oo::kWeight], grad = op.inputs[oo::kGrad];
        need_index(weight, op, "weight");
        need_index(grad, op, "grad");
        const std::int64_t n = tensor(weight).nelms;
        for (std::size_t i = 0; i < op.state.size(); ++i) {
          const int t = op.state[i];
          need_index(t, op, "state");
          if (tensor(t).nelms != n)
            throw Error("plan: {}, op '{}': '{}' has {} elements but the weight '{}' has {}", where,
                        op.label, tensor(t).name, tensor(t).nelms, tensor(weight).name, n);
          const bool ok = i == oo::kWeight
                              ? tensor(t).dtype == planner::DType::kFloat32
                              : optimizer->accepts(i - oo::kFirstState, tensor(t).dtype);
          if (!ok)
            throw Error("plan: {}, op '{}': '{}' must be float32", where, op.label, tensor(t).name);
        }
        if (tensor(grad).nelms != n || tensor(grad).dtype != planner::DType::kFloat32)
          throw Error("plan: {}, op '{}': the gradient '{}' must be float32 of {} elements", where,
                      op.label, tensor(grad).name, n);
        break;
      }
      case OpKind::kRepeat:
        if (op.steps < 1)
          throw Error("plan: {}, op '{}': repeat of {} steps", where, op.label, op.steps);
        for (const Op& inner : op.body) {
          if (inner.kind == OpKind::kAlloc || inner.kind == OpKind::kFree ||
              inner.kind == OpKind::kRepeat)
            throw Error("plan: {}, op '{}': a repeat body holds a {}", where, op.label,
                        planner::op_kind_name(inner.kind));
          check_op(inner);
        }
        break;
      case OpKind::kSend:
      case OpKind::kRecv: {
        // A copy between a stage's tensor and a receive buffer of equal size (the
        // planner's walk has checked which stage holds which).
        const int src = op.inputs[planner::shard_operand::kSrc];
        const int dst = op.outputs[planner::shard_operand::kDst];
        if (!plan.pipeline || op.peer < 0 ||
            op.peer >= static_cast<int>(plan.pipeline->stages.size()))
          throw Error("plan: {}, op '{}': a {} needs a pipelined plan and a peer stage", where,
                      op.label, planner::op_kind_name(op.kind));
        if (tensor(src).nbytes != tensor(dst).nbytes)
          throw Error("plan: {}, op '{}': copies {} bytes into {}", where, op.label,
                      tensor(src).nbytes, tensor(dst).nbytes);
        break;
      }
    }
  }

  // ---- tensors -----------------------------------------------------------------------

  // io_overlapped double buffering: odd repeat steps use the second slot.
  int slot(int t, std::int64_t s) const {
    const int second = tensor(t).double_buffer;
    return (s % 2 == 1 && second >= 0) ? second : t;
  }

  std::byte* raw(Replica& rep, int t, std::int64_t s, const Op& op) const {
    const int k = slot(t, s);
    std::byte* p = rep.tensors[static_cast<std::size_t>(k)];
    if (!p)
      throw Error("{}, op '{}' ({}): tensor '{}' is not allocated", where, op.label,
                  planner::op_kind_name(op.kind), tensor(k).name);
    return p;
  }
  float* f32(Replica& rep, int t, std::int64_t s, const Op& op) const {
    return reinterpret_cast<float*>(raw(rep, t, s, op));
  }

  // ---- ops on one replica ------------------------------------------------------------

  std::int64_t entry_of(const Op& op, std::int64_t s) const {
    if (op.entry >= 0) return op.entry;
    return plan.buffers[static_cast<std::size_t>(op.buffer)].flat_index(op.row, s);
  }

  // fn(j0, j1) over the columns [0, n_cols): in kColumnBlock blocks on the pool when one
  // replica has the threads and the GEMM is large enough (rows x inner x cols >= 2^18
  // multiply-adds), else at once. The blocks depend on the shapes only
  // (planner::column_blocks, which the workspace is sized by).
  template <typename Fn>
  void in_column_blocks(std::int64_t rows_x_inner, std::int64_t n_cols, const Fn& fn) {
    const planner::ColumnBlocks cb = planner::column_blocks(rows_x_inner, n_cols);
    if (cb.n == 1) {
      fn(0, n_cols);
      return;
    }
    auto block = [&](std::int64_t k) { fn(k * cb.width, std::min(n_cols, (k + 1) * cb.width)); };
    if (intra_op) {
      pool->run(cb.n, block);
    } else {
      for (std::int64_t k = 0; k < cb.n; ++k) block(k);
    }
  }

  void run_local(const Op& op, std::int64_t r, std::int64_t s) { run_on(replica(r), op, r, s); }

  // The op on one device `rep` of replica r, at repeat step (or micro-batch) s.
  void run_on(Replica& rep, const Op& op, std::int64_t r, std::int64_t s) {
    switch (op.kind) {
      case OpKind::kAlloc: {
        const int t = planner::the_tensor(op);
        const auto& d = tensor(t);
        auto& ptr = rep.tensors[static_cast<std::size_t>(t)];
        if (ptr)
          throw Error("{}, op '{}': tensor '{}' is already allocated", where, op.label, d.name);
        const std::uint64_t at = rep.fit->allocate(d.nbytes);
        // The block was sized by replaying this plan's allocs and frees; only a plan the
        // replay skipped (an alloc of a live tensor) could get here.
        if (at == planner::FirstFit::kNone)
          throw Error("{}, op '{}': no room for tensor '{}' ({} bytes) in the replica's {} bytes",
                      where, op.label, d.name, d.nbytes, block_bytes);
        ptr = rep.block.data() + at;
        if (options.poison_new_tensors) std::memset(ptr, 0xFF, d.nbytes);
        rep.account.allocate(d.nbytes, d.cls, d.always_live);
        return;
      }
      case OpKind::kFree: {
        const int t = planner::the_tensor(op);
        const auto& d = tensor(t);
        auto& ptr = rep.tensors[static_cast<std::size_t>(t)];
        if (!ptr)
          throw Error("{}, op '{}': frees '{}', which is not allocated", where, op.label, d.name);
        rep.fit->release(static_cast<std::uint64_t>(ptr - rep.block.data()), d.nbytes);
        ptr = nullptr;
        rep.account.release(d.nbytes, d.cls, d.always_live);
        return;
      }
      case OpKind::kZero: {
        const int t = planner::the_tensor(op);
        std::memset(raw(rep, t, s, op), 0, tensor(t).nbytes);
        return;
      }
      case OpKind::kRemoteLoad: {
        const int t = planner::the_tensor(op);
        const auto n = tensor(t).nbytes;
        rep.store->load(op.buffer, entry_of(op, s), raw(rep, t, s, op), n);
        rep.remote_in.fetch_add(n, std::memory_order_relaxed);
        return;
      }
      case OpKind::kRemoteStore: {
        const int t = planner::the_tensor(op);
        const auto n = tensor(t).nbytes;
        rep.store->store(op.buffer, entry_of(op, s), raw(rep, t, s, op), n);
        rep.remote_out.fetch_add(n, std::memory_order_relaxed);
        return;
      }
      case OpKind::kHostLoad:
        host_load(op, rep, r, s);
        return;
      case OpKind::kHostStore: {
        const int t = planner::the_tensor(op);
        if (op.stream == Stream::kLogits) {
          if (static_cast<std::size_t>(s) >= rep.logits.size())
            rep.logits.resize(static_cast<std::size_t>(s) + 1);
          const float* src = f32(rep, t, s, op);
          rep.logits[static_cast<std::size_t>(s)].assign(src, src + tensor(t).nelms);
          rep.host_out.fetch_add(tensor(t).nbytes, std::memory_order_relaxed);
          return;
        }
        if (static_cast<std::size_t>(s) >= rep.losses.size())
          rep.losses.resize(static_cast<std::size_t>(s) + 1, 0.0);
        rep.losses[static_cast<std::size_t>(s)] = *f32(rep, t, s, op);
        rep.host_out.fetch_add(tensor(t).nbytes, std::memory_order_relaxed);
        return;
      }
      case OpKind::kForward: {
        const auto& l = layer_of(op);
        layer_kernel(l.kind).forward(op, l, Run(*this, rep, op, r, s));
        return;
      }
      case OpKind::kLoss: {
        namespace lo = planner::loss_operand;
        const int logits = op.inputs[lo::kLogits], loss_t = op.outputs[lo::kLoss];
        const std::int64_t n = tensor(logits).shape[0];
        const float loss = kern.softmax_cross_entropy(
            f32(rep, logits, s, op), f32(rep, op.inputs[lo::kLabels], s, op),
            f32(rep, op.outputs[lo::kDlogits], s, op), n, plan.n_classes);
        *f32(rep, loss_t, s, op) = loss;
        if (options.check_finite && !std::isfinite(loss))
          throw Error(
              "optimizer step {}, {}: the loss '{}' of replica {} at accumulation step {} is {}",
              steps_done + 1, where, tensor(loss_t).name, r, s, loss);
        return;
      }
      case OpKind::kBackward: {
        const auto& l = layer_of(op);
        layer_kernel(l.kind).backward(op, l, Run(*this, rep, op, r, s));
        return;
      }
      case OpKind::kOptimizerStep: {
        namespace oo = planner::optimizer_operand;
        const int weight = op.state[oo::kWeight], grad = op.inputs[oo::kGrad];
        const std::int64_t n = tensor(weight).nelms;
        const float* g = f32(rep, grad, s, op);
        if (options.check_finite && any_non_finite(g, n)) {
          for (std::int64_t i = 0; i < n; ++i)
            if (!std::isfinite(g[i]))
              throw Error(
                  "optimizer step {}, {}: the gradient '{}' of replica {} is {} at element {}",
                  steps_done + 1, where, tensor(grad).name, r, g[i], i);
        }
        // The optimizer's state after the weight (at most Adam's two).
        std::array<std::byte*, 2> state{};
        std::array<config::DType, 2> dtypes{};
        const std::size_t n_state = op.state.size() - oo::kFirstState;
        POPKIT_ASSERT(n_state <= state.size());
        for (std::size_t i = 0; i < n_state; ++i) {
          state[i] = raw(rep, op.state[oo::kFirstState + i], s, op);
          dtypes[i] = tensor(op.state[oo::kFirstState + i]).dtype;
        }
        optimizer->step(kern, f32(rep, weight, s, op), g, std::span(state).first(n_state),
                        std::span<const config::DType>(dtypes).first(n_state), n,
                        steps_done + 1);  // t incremented before use
        return;
      }
      default:
        POPKIT_ASSERT(false);
    }
  }

  void host_load(const Op& op, Replica& rep, std::int64_t r, std::int64_t s) {
    if (batches == nullptr)
      throw Error("{}, op '{}': host_load outside train_step (no batch source)", where, op.label);
    const MicroBatch mb = batches->micro_batch(r, s);
    const std::int64_t want = plan.micro_batch_size;
    if (mb.size != want || static_cast<std::int64_t>(mb.labels.size()) != want ||
        static_cast<std::int64_t>(mb.pixels.size()) != want * image_size)
      throw Error(
          "host_load: the micro-batch of replica {} at step {} has {} samples, {} labels and {} "
          "pixels, but the plan's tensor '{}' has shape {} ({} samples of {} pixels)",
          r, s, mb.size, mb.labels.size(), mb.pixels.size(), tensor(planner::the_tensor(op)).name,
          shape_str(tensor(planner::the_tensor(op)).shape), want, image_size);
    float* dst = f32(rep, planner::the_tensor(op), s, op);
    if (op.stream == Stream::kImages) {
      normalize_pixels(mb.pixels.data(), mb.pixels.size(), options.normalize_mean,
                       options.normalize_std, dst);
    } else {
      for (std::size_t i = 0; i < mb.labels.size(); ++i) {
        if (mb.labels[i] >= plan.n_classes)
          throw Error("host_load: label {} of replica {} at step {} is not a class below {}",
                      mb.labels[i], r, s, plan.n_classes);
        dst[i] = static_cast<float>(mb.labels[i]);
      }
    }
    rep.host_in.fetch_add(tensor(planner::the_tensor(op)).nbytes, std::memory_order_relaxed);
  }

  // ---- collectives -------------------------------------------------------------------

  std::vector<ReplicaBuffer> buffers_of(int t, std::int64_t s, const Op& op) {
    std::vector<ReplicaBuffer> out;
    out.reserve(static_cast<std::size_t>(hosted.n));
    const int k = slot(t, s);
    for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r)
      out.push_back({r, raw(holder(r, k), t, s, op), tensor(k).nelms, tensor(k).dtype});
    return out;
  }

  // The collectives `op` runs on: a pipelined plan's stages reduce among themselves,
  // each with its own, on the stage that holds the op's first operand.
  Collectives* collectives_of(const Op& op) const {
    if (n_stages == 1) return collectives.get();
    const int t = op.inputs.empty() ? planner::the_tensor(op) : op.inputs[0];
    return stage_collectives[static_cast<std::size_t>(std::max(0, tensor(t).stage))].get();
  }

  void run_collective(const Op& op, std::int64_t s) {
    Collectives* group = collectives_of(op);
    switch (op.kind) {
      case OpKind::kAllReduce:
        group->all_reduce(op.grouping, op.reduce, buffers_of(planner::the_tensor(op), s, op));
        break;
      case OpKind::kReduceScatter:
        group->reduce_scatter(op.grouping, op.shard_grouping, op.reduce,
                              buffers_of(op.inputs[planner::shard_operand::kSrc], s, op),
                              buffers_of(op.outputs[planner::shard_operand::kDst], s, op));
        break;
      case OpKind::kAllGather:
        group->all_gather(op.grouping, buffers_of(op.inputs[planner::shard_operand::kSrc], s, op),
                          buffers_of(op.outputs[planner::shard_operand::kDst], s, op));
        break;
      case OpKind::kSliceShard:
        group->slice_shard(op.grouping, buffers_of(op.inputs[planner::shard_operand::kSrc], s, op),
                           buffers_of(op.outputs[planner::shard_operand::kDst], s, op));
        break;
      default:
        POPKIT_ASSERT(false);
    }
  }

  // ---- execution ---------------------------------------------------------------------

  void add_seconds(OpCategory c, double seconds) {
    timings.category_seconds[static_cast<std::size_t>(c)] += seconds;
    if (current_phase < timings.phase_category_seconds.size())
      timings.phase_category_seconds[current_phase][static_cast<std::size_t>(c)] += seconds;
  }

  // A collective on all replicas (the caller drives it; its chunks use the pool).
  void run_op(const Op& op, std::int64_t s) {
    const auto t0 = Clock::now();
    run_collective(op, s);
    add_seconds(category(op.kind), seconds_since(t0));
  }

  static bool in_segment(const Op& op) {
    return op.kind != OpKind::kRepeat && !is_collective(op.kind);
  }

  // A segment: `ops` (all local) for the repeat steps [s0, s1), step after step, each
  // replica running the whole segment as one task, so the pool synchronises once per
  // segment, not once per op. The outcome is the same as running op after op on all
  // replicas: replicas share nothing between collectives, and when ops fail the one
  // reported is the earliest (step, op), then the lowest replica, as bulk-synchronous
  // execution would report it. Time per category: the slowest replica's.
  // Allocs and frees run in the segment too (each replica has its own account), each
  // followed by the replica's memory sample when `sample` is set.
  void run_segment(const std::vector<const Op*>& ops, std::int64_t s0, std::int64_t s1,
                   bool sample) {
    if (ops.empty() || s0 >= s1) return;
    const std::vector<Chunk> chunks = sync_chunks(ops);
    if (chunks.size() > 1) {
      run_synced(ops, chunks, s0, s1, sample);
      return;
    }
    auto task = [&](std::int64_t r) {
      Replica& rep = replica(r);
      rep.segment_seconds.fill(0.0);
      rep.error = nullptr;
      std::size_t at = 0;
      for (std::int64_t s = s0; s < s1; ++s)
        for (const Op* op : ops)
          if (!run_at(*op, r, s, at++, sample)) return;
    };
    on_every_replica(task);
    add_slowest_segment_seconds();
    rethrow_earliest_failure();
  }

  // One op of a segment on replica r at step s, `at` its position in the segment
  // (step-major, then op). False when it failed: the replica's error and its position
  // are set.
  bool run_at(const Op& op, std::int64_t r, std::int64_t s, std::size_t at, bool sample) {
    Replica& rep = replica(r);
    if (preload_on_io_thread && op.preload && op.kind == OpKind::kRemoteLoad) {
      // The phase's preload loads go to the IO thread as one piece, posted at the first of
      // them (the planner puts their allocs before them), waited for at the phase's end
      // (finish_preloads).
      if (!rep.preload_posted) {
        io->post(local(r), preload_job, r);
        rep.preload_posted = true;
      }
      return true;
    }
    const auto t0 = Clock::now();
    try {
      run_local(op, r, s);
    } catch (...) {
      rep.error = std::current_exception();
      rep.error_at = at;
      return false;
    }
    if (sample && (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree))
      rep.sampler.sample(rep.account);
    rep.segment_seconds[static_cast<std::size_t>(category(op.kind))] += seconds_since(t0);
    return true;
  }

  // The failure bulk-synchronous execution would report: the earliest position, then
  // the lowest replica.
  void rethrow_earliest_failure() {
    const Replica* failed = nullptr;
    for (const auto& rep : replicas)
      if (rep->error && (failed == nullptr || rep->error_at < failed->error_at)) failed = rep.get();
    if (failed != nullptr) std::rethrow_exception(failed->error);
  }

  // ---- sync patterns (execution.sync_pattern; planner/sync_groups.h) ------------------
  // Host and remote transfers are the sync points: at each run of them a device waits for
  // the others of its GS2 group. The segment's ops are cut into chunks, each a run of
  // transfers and the compute after it, and the members of a group start each chunk
  // together: no device begins a run of transfers before its group finished what came
  // before.
  //  - full: one group, every device: every replica waits for every other at each IO
  //    (the pool's threads as lanes of fixed replicas, meeting at a barrier per chunk).
  //  - replica_and_ladder: the even and the odd devices, two ladder sets, each in
  //    lockstep within itself, that never wait for each other at IO (Poplar: "an IPU
  //    group communicates with the host without synchronisation between groups"), which
  //    lets one set move data while the other computes. With R = 2 each set is one
  //    device, as under single_pipeline: GS2 is the same. There is no host link to take
  //    in turns on a CPU: a lock that made the sets take turns cost the phased example
  //    10 % and modelled nothing Poplar does.
  //  - single_pipeline: no chunks: each device does its IO without waiting.
  // A pattern changes when a replica waits, never what it computes: replicas share
  // nothing between collectives. Within a process: ranks meet at the collectives.

  // A run of transfers, ops [first, io_end), and the compute after it, [io_end, end).
  struct Chunk {
    std::size_t first = 0, io_end = 0, end = 0;
    [[nodiscard]] bool io() const { return io_end > first; }
  };

  static bool is_io(const Op& op) {
    const OpCategory c = category(op.kind);
    return c == OpCategory::kHostIo || c == OpCategory::kRemote;
  }

  std::vector<Chunk> sync_chunks(const std::vector<const Op*>& ops) const {
    // A group of one device waits for no one: the largest group hosted here, all of them
    // (full), a ladder set (every other replica), or one (single_pipeline).
    const std::int64_t largest_group = plan.sync_pattern == config::SyncPattern::kFull ? hosted.n
                                       : plan.sync_pattern == config::SyncPattern::kReplicaAndLadder
                                           ? (hosted.n + 1) / 2
                                           : 1;
    const bool syncs = n_stages == 1 && largest_group > 1;
    if (!syncs || std::none_of(ops.begin(), ops.end(), [](const Op* o) { return is_io(*o); }))
      return {{0, 0, ops.size()}};
    // A chunk starts at each transfer that follows compute; allocs and frees are
    // bookkeeping, no program step, and join the part they are in, so that the loads of
    // a step (images, labels, each after its alloc) are one run of transfers.
    constexpr std::size_t kNoCompute = ~std::size_t{0};
    std::vector<Chunk> chunks;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const bool bookkeeping = category(ops[i]->kind) == OpCategory::kMemory;
      const bool transfer = is_io(*ops[i]);
      const bool computed = !chunks.empty() && chunks.back().io_end != kNoCompute;
      if (chunks.empty() || (transfer && computed)) chunks.push_back({i, kNoCompute, i});
      if (!bookkeeping && !transfer && chunks.back().io_end == kNoCompute) chunks.back().io_end = i;
      chunks.back().end = i + 1;
    }
    for (Chunk& c : chunks)
      if (c.io_end == kNoCompute) c.io_end = c.end;
    return chunks;
  }

  // The segment's chunks, step after step (item i is chunk i % n of step s0 + i / n), on
  // the groups of the pattern. A failure stops a group; another goes on up to the item
  // that failed, so that the earliest failure is the one reported, as in bulk-synchronous
  // execution.
  void run_synced(const std::vector<const Op*>& ops, const std::vector<Chunk>& chunks,
                  std::int64_t s0, std::int64_t s1, bool sample) {
    const auto n = static_cast<std::int64_t>(chunks.size());
    const std::int64_t items = (s1 - s0) * n;
    for (auto& rep : replicas) {
      rep->error = nullptr;
      rep->segment_seconds.fill(0.0);
    }
    // Replica r's ops [first, end) of item i's chunk; false when one failed.
    auto run_ops = [&](std::int64_t r, std::int64_t item, std::size_t first, std::size_t end) {
      const std::int64_t s = s0 + item / n;
      for (std::size_t k = first; k < end; ++k)
        if (!run_at(*ops[k], r, s, static_cast<std::size_t>(s - s0) * ops.size() + k, sample))
          return false;
      return true;
    };
    auto chunk = [&](std::int64_t item) -> const Chunk& {
      return chunks[static_cast<std::size_t>(item % n)];
    };
    std::atomic<std::int64_t> failed_item{items};
    std::atomic<std::int64_t> io_syncs{0};  // counted by the sets' threads
    auto note_failure = [&](std::int64_t item) {
      std::int64_t seen = failed_item.load();
      while (item < seen && !failed_item.compare_exchange_weak(seen, item)) {
      }
    };
    // One lane: its members' chunk of each item, on `on` (a pool, or one after another
    // when null); with `meet`, meeting the other lanes after each item (full). A lane that
    // stops drops out of `meet`. Every member runs a part even when another failed in it,
    // so that the earliest failure is the one reported.
    auto run_lane = [&](const std::vector<std::int64_t>& members, ThreadPool* on,
                        std::barrier<>* meet, bool count) {
      const auto m = static_cast<std::int64_t>(members.size());
      for (std::int64_t item = 0; item < items; ++item) {
        if (item > failed_item.load()) break;
        const Chunk& c = chunk(item);
        std::atomic<bool> ok{true};
        auto part = [&](std::size_t first, std::size_t end) {
          auto member = [&](std::int64_t i) {
            if (!run_ops(members[static_cast<std::size_t>(i)], item, first, end)) ok = false;
          };
          if (on != nullptr) {
            on->run(m, member);
          } else {
            for (std::int64_t i = 0; i < m; ++i) member(i);
          }
        };
        if (c.io()) {
          part(c.first, c.io_end);
          if (count) io_syncs.fetch_add(1);
        }
        if (ok) part(c.io_end, c.end);
        if (!ok) {
          note_failure(item);
          break;
        }
        if (meet != nullptr && item + 1 < items) meet->arrive_and_wait();
      }
      if (meet != nullptr) meet->arrive_and_drop();
    };
    std::vector<std::int64_t> all;
    for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r) all.push_back(r);
    if (plan.sync_pattern == config::SyncPattern::kFull) {
      // A lane per pool thread, each running the same replicas at every item, so that a
      // replica's memory stays in the cache of the core that ran it last (a run of the
      // pool per item would hand the replicas to whichever thread came first).
      const auto lanes = std::min<std::int64_t>(pool->size(), hosted.n);
      std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(lanes));
      for (std::size_t i = 0; i < all.size(); ++i)
        members[i % static_cast<std::size_t>(lanes)].push_back(all[i]);
      std::barrier<> meet(lanes);
      pool->run(lanes, [&](std::int64_t l) {
        run_lane(members[static_cast<std::size_t>(l)], nullptr, &meet, l == 0);
      });
    } else {
      // Replica r is device r (one stage): its ladder set is r % 2, as in GS2. Each set
      // runs on a thread of the pool with half the pool's threads for its members.
      std::array<std::vector<std::int64_t>, 2> sets;
      for (const std::int64_t r : all) sets[static_cast<std::size_t>(r % 2)].push_back(r);
      const int per_set = std::max(1, pool->size() / 2);
      for (auto& lane : lane_pools)
        if (per_set > 1 && (!lane || lane->size() != per_set))
          lane = std::make_unique<ThreadPool>(per_set);
      pool->run(2, [&](std::int64_t l) {
        const auto i = static_cast<std::size_t>(l);
        run_lane(sets[i], per_set > 1 ? lane_pools[i].get() : nullptr, nullptr, true);
      });
    }
    timings.io_syncs += io_syncs.load();
    add_slowest_segment_seconds();
    rethrow_earliest_failure();
  }

  // task(r) for every replica this process hosts: one per pool thread, or one after
  // another on the caller when one replica has the threads (its GEMMs use them).
  void on_every_replica(const std::function<void(std::int64_t)>& task) {
    if (intra_op || hosted.n == 1) {
      for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r) task(r);
    } else {
      pool->run(hosted.n, [&](std::int64_t i) { task(hosted.first + i); });
    }
  }

  // A segment's time per category: the slowest replica's.
  void add_slowest_segment_seconds() {
    for (std::size_t c = 0; c < kNumOpCategories; ++c) {
      double slowest = 0.0;
      for (const auto& rep : replicas) slowest = std::max(slowest, rep->segment_seconds[c]);
      add_seconds(static_cast<OpCategory>(c), slowest);
    }
  }

  // The ops of `body` for steps [s0, s1): runs of local ops (allocs and frees among
  // them) as segments, collectives and repeats between them. The memory account changes
  // only at alloc and free, so sampling after those is sampling after every op.
  void run_body(const std::vector<Op>& body, std::int64_t s0, std::int64_t s1, bool sample) {
    const bool all_local = std::all_of(body.begin(), body.end(), in_segment);
    if (all_local) {
      std::vector<const Op*> ops;
      for (const Op& op : body) ops.push_back(&op);
      run_segment(ops, s0, s1, sample);
      return;
    }
    for (std::int64_t s = s0; s < s1; ++s) {
      std::vector<const Op*> ops;
      for (const Op& op : body) {
        if (in_segment(op)) {
          ops.push_back(&op);
          continue;
        }
        run_segment(ops, s, s + 1, sample);
        ops.clear();
        if (op.kind == OpKind::kRepeat) {
          run_repeat(op);
        } else {
          run_op(op, s);
        }
      }
      run_segment(ops, s, s + 1, sample);
    }
  }

  void run_repeat(const Op& op) {
    if (op.io_mode == config::IoMode::kIoOverlapped) {
      run_overlapped(op);
    } else {
      run_body(op.body, 0, op.steps, false);
    }
  }

  // kAuto's choice, per repeat: the IO thread needs a core of its own and pieces big
  // enough to pay for the hand-off, and for the consuming core reading the data from
  // another core's cache. Measured here (bench/README.md), R 1 on one compute thread:
  // at 200 KiB per step the thread lost 2-10% to moving the data in place; from 768 KiB
  // it was even or gained up to 5%.
  static constexpr std::uint64_t kIoThreadMinBytes = std::uint64_t{512} << 10;

  bool use_io_thread(std::uint64_t bytes_per_step) const {
    switch (options.io_overlap) {
      case IoOverlap::kThread:
        return true;
      case IoOverlap::kInline:
        return false;
      case IoOverlap::kAuto:
        break;
    }
    return n_cores > pool->size() && bytes_per_step >= kIoThreadMinBytes;
  }

  // io_overlapped with the IO thread: the loads and stores of double-buffered tensors
  // leave the step's compute. Piece s of a replica is its stores of step s-1, then its
  // loads of step s+1 (s-1 and s+1 share a slot, so stores go first); the IO thread runs
  // it while the replica computes step s, or the replica itself if the thread has not
  // begun it when the replica needs step s+1's data. Each replica runs the whole repeat
  // as one task, waiting only for its own pieces: no barrier per step. A failure
  // reported is the earliest by (step, position), then the lowest replica; piece s
  // counts as the start of step s+1, where its data is needed.
  // Without the IO thread (IoOverlap::kInline) the repeat runs as io runs it, each step
  // in its own slots: on a machine with no core free, a thread that moves the data
  // could only preempt a replica, and moving it later than io does costs cache misses.
  void run_overlapped(const Op& op) {
    auto async = [&](const Op& o) {
      const OpCategory c = category(o.kind);
      return (c == OpCategory::kRemote || c == OpCategory::kHostIo) &&
             tensor(planner::the_tensor(o)).double_buffer >= 0;
    };
    auto is_load = [](const Op& o) {
      return o.kind == OpKind::kHostLoad || o.kind == OpKind::kRemoteLoad;
    };
    std::vector<const Op*> stores, loads, compute;
    std::uint64_t bytes_per_step = 0;
    for (const Op& o : op.body) {
      if (!async(o)) {
        compute.push_back(&o);
      } else {
        (is_load(o) ? loads : stores).push_back(&o);
        bytes_per_step += tensor(planner::the_tensor(o)).nbytes;
      }
    }
    if (!use_io_thread(bytes_per_step) ||
        !std::all_of(compute.begin(), compute.end(), [](const Op* o) { return in_segment(*o); })) {
      // kInline, or a collective in the loop (every step is bulk-synchronous then): the
      // replicas' threads move the data where io would, each step in its own slots.
      run_body(op.body, 0, op.steps, false);
      return;
    }
    const std::int64_t steps = op.steps;
    using Position = std::array<std::int64_t, 3>;  // (step, 0 = IO | 1 + op, op in piece)
    // Per replica, written by its thread or by the thread running its piece (one at a
    // time, ordered by the queue's waits); a cache line each, as both replicas write theirs.
    struct alignas(64) ReplicaIo {
      std::array<double, kNumOpCategories> seconds{};
      std::int64_t at = 0;  // the piece's ops begun, for the position of a failure
      std::exception_ptr error;
      Position error_at{};
    };
    std::vector<ReplicaIo> state(static_cast<std::size_t>(hosted.n));
    auto io_piece = [&](std::int64_t r, std::int64_t s) {
      ReplicaIo& st = state[static_cast<std::size_t>(local(r))];
      st.at = 0;
      for (const bool load : {false, true}) {
        const std::int64_t step = load ? s + 1 : s - 1;
        if (step < 0 || step >= steps) continue;
        for (const Op* o : load ? loads : stores) {
          ++st.at;
          const auto t0 = Clock::now();
          run_local(*o, r, step);
          st.seconds[static_cast<std::size_t>(category(o->kind))] += seconds_since(t0);
        }
      }
    };
    // IO time per category: the slowest replica's, as for compute (with the IO thread,
    // on top of the compute time, so the categories can sum to more than the wall).
    auto add_io_seconds = [&] {
      for (std::size_t c = 0; c < kNumOpCategories; ++c) {
        double slowest = 0.0;
        for (const ReplicaIo& st : state) slowest = std::max(slowest, st.seconds[c]);
        add_seconds(static_cast<OpCategory>(c), slowest);
      }
    };

    if (!io) io = std::make_unique<IoQueue>(hosted.n);
    finish_preloads();  // a slot holds one piece at a time
    // The IO thread's job: piece s of replica r, as one argument.
    const std::function<void(std::int64_t)> piece_job = [&](std::int64_t arg) {
      io_piece(hosted.first + arg % hosted.n, arg / hosted.n);
    };
    auto task = [&](std::int64_t r) {
      Replica& rep = replica(r);
      ReplicaIo& st = state[static_cast<std::size_t>(local(r))];
      rep.segment_seconds.fill(0.0);
      auto fail = [&](Position at) {
        st.error = std::current_exception();
        st.error_at = at;
      };
      bool posted = false;
      // The piece in flight must end before the task does: it writes this replica's slots.
      auto finish_piece = [&](std::int64_t s) -> bool {
        if (!posted) return true;
        posted = false;
        try {
          io->wait(local(r));
        } catch (...) {
          if (!st.error) fail({s + 1, 0, st.at});
          return false;
        }
        return true;
      };
      auto piece_here = [&](std::int64_t s, std::int64_t minor) -> bool {
        try {
          io_piece(r, s);
        } catch (...) {
          fail({s + 1, minor, st.at});
          return false;
        }
        return true;
      };
      if (!piece_here(-1, 0)) return;  // the loads of step 0
      for (std::int64_t s = 0; s < steps; ++s) {
        if (!finish_piece(s - 1)) return;  // the loads of step s
        io->post(local(r), piece_job, s * hosted.n + local(r));
        posted = true;
        for (std::size_t k = 0; k < compute.size(); ++k) {
          const auto t0 = Clock::now();
          try {
            run_local(*compute[k], r, s);
          } catch (...) {
            fail({s, 1 + static_cast<std::int64_t>(k), 0});
            finish_piece(s);
            return;
          }
          rep.segment_seconds[static_cast<std::size_t>(category(compute[k]->kind))] +=
              seconds_since(t0);
        }
      }
      if (!finish_piece(steps - 1)) return;
      piece_here(steps, 1);  // the stores of the last step
    };
    on_every_replica(task);
    add_slowest_segment_seconds();
    add_io_seconds();
    const ReplicaIo* failed = nullptr;
    for (const ReplicaIo& st : state)
      if (st.error && (failed == nullptr || st.error_at < failed->error_at)) failed = &st;
    if (failed != nullptr) std::rethrow_exception(failed->error);
  }

  void run_ops(const std::vector<Op>& ops, bool sample) { run_body(ops, 0, 1, sample); }

  void setup() {
    const auto t0 = Clock::now();
    where = "setup";
    if (n_stages > 1) {
      // Each always-live tensor on its stage's device of every replica.
      for (const Op& op : plan.setup)
        for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r)
          run_on(holder(r, planner::the_tensor(op)), op, r, 0);
    } else {
      run_ops(plan.setup, false);
    }
    timings.setup_seconds = seconds_since(t0);
  }

  // ---- pipelined execution (issue 16) ------------------------------------------------

  Mailbox& mailbox(std::int64_t r, std::int64_t to, std::int64_t from) const {
    const std::int64_t i = ((r - hosted.first) * n_stages + to) * 2 + (from < to ? 0 : 1);
    return *mailboxes[static_cast<std::size_t>(i)];
  }

  void abort_workers() {
    abort.store(true);
    for (auto& m : mailboxes) {
      std::lock_guard lock(m->mutex);
      m->changed.notify_all();
    }
    for (auto& b : stage_barriers) b->wake();
    for (auto& b : cycle_barriers) b->wake();
  }

  // Thrown by a worker that stops because another failed: not a failure of its own.
  struct StoppedByAnother {};
  [[noreturn]] static void aborted() { throw StoppedByAnother{}; }

  // A send: into stage `peer`'s receive buffer once the receiver took the last contents.
  void send(const Op& op, std::int64_t r, std::int64_t stage) {
    Mailbox& m = mailbox(r, op.peer, stage);
    const int src = op.inputs[0], dst = op.outputs[0];
    std::unique_lock lock(m.mutex);
    m.changed.wait(lock, [&] { return !m.full || abort.load(); });
    if (abort.load()) aborted();
    std::memcpy(raw(device(r, op.peer), dst, 0, op), raw(device(r, stage), src, 0, op),
                tensor(src).nbytes);
    m.full = true;
    m.changed.notify_all();
  }

  void receive(const Op& op, std::int64_t r, std::int64_t stage) {
    Mailbox& m = mailbox(r, stage, op.peer);
    const int src = op.inputs[0], dst = op.outputs[0];
    Replica& dev = device(r, stage);
    std::unique_lock lock(m.mutex);
    m.changed.wait(lock, [&] { return m.full || abort.load(); });
    if (abort.load()) aborted();
    std::memcpy(raw(dev, dst, 0, op), raw(dev, src, 0, op), tensor(src).nbytes);
    m.full = false;
    m.changed.notify_all();
  }

  // Worker (r, stage): the stage's program on its device. Ops in a slot see the slot's
  // micro-batch as their step; collectives meet the same stage of the other replicas.
  // Returns the time spent in the slots not waiting for a neighbour, and the slots'
  // first start and last end.
  struct StageRun {
    double busy = 0.0;
    Clock::time_point first, last;
  };
  StageRun run_stage(std::size_t p, std::int64_t r) {
    const planner::Phase& ph = plan.phases[p];
    const std::int64_t stage = ph.stage;
    Replica& dev = device(r, stage);
    dev.segment_seconds.fill(0.0);
    dev.sampler.begin(dev.account);
    StageRun run;
    // The sync pattern's meetings (planner/sync_groups.h, PipelineCycles): before a slot,
    // every meeting of the device's group up to the slot's cycle; after the last slot
    // (the flush), the rest.
    const std::int64_t device_id = r * n_stages + stage;
    const std::int64_t group = cycles ? cycles->group_of[static_cast<std::size_t>(device_id)] : -1;
    std::size_t met = 0;
    auto meet_until = [&](std::int64_t cycle) {
      const auto g = static_cast<std::size_t>(group);
      const auto& meeting = cycles->meetings[g];
      for (; met < meeting.cycles.size() && meeting.cycles[met] <= cycle; ++met) {
        if (!cycle_barriers[g]->arrive_and_wait(abort)) aborted();
        if (device_id == meeting.devices.front()) cycle_meetings.fetch_add(1);
      }
    };
    auto meet_before_slot = [&](std::size_t k) {
      if (group >= 0) meet_until(cycles->slot_cycle[p][k]);
    };
    auto meet_the_rest = [&] {
      if (group >= 0) meet_until(cycles->cycles);
    };
    const std::int64_t slots_end = ph.slots.empty() ? 0 : ph.slots.back().end_op;
    std::size_t slot = 0;
    for (std::size_t i = 0; i < ph.ops.size(); ++i) {
      if (abort.load()) aborted();
      const Op& op = ph.ops[i];
      while (slot < ph.slots.size() && static_cast<std::int64_t>(i) >= ph.slots[slot].end_op)
        ++slot;
      const bool in_slot =
          slot < ph.slots.size() && static_cast<std::int64_t>(i) >= ph.slots[slot].first_op;
      const std::int64_t mb = in_slot ? ph.slots[slot].micro_batch : 0;
      if (in_slot && static_cast<std::int64_t>(i) == ph.slots[slot].first_op)
        meet_before_slot(slot);
      if (static_cast<std::int64_t>(i) == slots_end) meet_the_rest();
      const auto t0 = Clock::now();
      if (in_slot && i == static_cast<std::size_t>(ph.slots.front().first_op)) run.first = t0;
      if (is_collective(op.kind)) {
        StageBarrier& barrier = *stage_barriers[static_cast<std::size_t>(stage)];
        if (!barrier.arrive_and_wait(abort)) aborted();
        if (r == hosted.first) run_collective(op, mb);
        if (!barrier.arrive_and_wait(abort)) aborted();
      } else if (op.kind == OpKind::kSend) {
        send(op, r, stage);
      } else if (op.kind == OpKind::kRecv) {
        receive(op, r, stage);
      } else {
        run_on(dev, op, r, mb);
        if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) dev.sampler.sample(dev.account);
      }
      const double t = seconds_since(t0);
      dev.segment_seconds[static_cast<std::size_t>(category(op.kind))] += t;
      if (in_slot) {
        // A transfer's time is mostly its wait for the neighbour: idle, not work.
        if (op.kind != OpKind::kRecv && op.kind != OpKind::kSend) run.busy += t;
        run.last = Clock::now();
      }
    }
    meet_the_rest();  // when the slots end the program
    return run;
  }

  // One step of a pipelined plan: a worker per (replica, stage), all at once.
  void run_pipelined(const BatchSource& source) {
    const auto t_step = Clock::now();
    batches = &source;
    where = "pipelined step";
    const auto S = static_cast<std::size_t>(n_stages);
    timings.phase_seconds.resize(plan.phases.size(), 0.0);
    timings.phase_category_seconds.resize(plan.phases.size());
    phase_memory.resize(plan.phases.size(),
                        std::vector<planner::PhaseMemory>(static_cast<std::size_t>(hosted.n)));
    for (auto& m : mailboxes) m->full = false;
    abort.store(false);
    cycle_meetings.store(0);
    const std::size_t n_workers = static_cast<std::size_t>(hosted.n) * S;
    std::vector<StageRun> runs(n_workers);
    std::vector<std::exception_ptr> errors(n_workers);
    std::vector<std::thread> workers;
    workers.reserve(n_workers);
    for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r)
      for (std::size_t p = 0; p < plan.phases.size(); ++p) {
        const std::size_t w = static_cast<std::size_t>(r - hosted.first) * S + p;
        workers.emplace_back([this, &runs, &errors, w, r, p] {
          const FlushDenormals mode;  // every engine thread computes in the same mode
          try {
            runs[w] = run_stage(p, r);
          } catch (const StoppedByAnother&) {  // the failure is the other worker's
          } catch (...) {
            errors[w] = std::current_exception();
            abort_workers();
          }
        });
      }
    for (auto& t : workers) t.join();
    batches = nullptr;
    // The first failure in replica then stage order.
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    const double step = seconds_since(t_step);
    Clock::time_point begin = runs.front().first, end = runs.front().last;
    double busy = 0.0;
    for (std::size_t p = 0; p < plan.phases.size(); ++p) {
      double slowest = 0.0;
      std::array<double, kNumOpCategories> by_category{};
      for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r) {
        const std::size_t w = static_cast<std::size_t>(r - hosted.first) * S + p;
        const Replica& dev = device(r, plan.phases[p].stage);
        double total = 0.0;
        for (std::size_t c = 0; c < kNumOpCategories; ++c) {
          by_category[c] = std::max(by_category[c], dev.segment_seconds[c]);
          total += dev.segment_seconds[c];
        }
        slowest = std::max(slowest, total);
        const auto& m = dev.sampler.memory();
        auto& kept = phase_memory[p][static_cast<std::size_t>(r - hosted.first)];
        if (m.peak > kept.peak || timings.steps == 0) kept = m;
        begin = std::min(begin, runs[w].first);
        end = std::max(end, runs[w].last);
        busy += runs[w].busy;
      }
      timings.phase_seconds[p] += slowest;
      for (std::size_t c = 0; c < kNumOpCategories; ++c) {
        timings.phase_category_seconds[p][c] += by_category[c];
        timings.category_seconds[c] += by_category[c];
      }
    }
    const double span = std::chrono::duration<double>(end - begin).count();
    const double devices = static_cast<double>(n_workers);
    timings.pipeline_bubble.push_back(span > 0 ? std::max(0.0, 1.0 - busy / (devices * span))
                                               : 0.0);
    timings.io_syncs += cycle_meetings.load();
    ++timings.steps;
    timings.step_seconds.push_back(step);
  }

  // One execution of the plan's phases over the batch `source` serves, with their
  // timings and memory samples.
  void run_phases(const BatchSource& source) {
    if (n_stages > 1) return run_pipelined(source);
    const auto t_step = Clock::now();
    batches = &source;
    timings.phase_seconds.resize(plan.phases.size(), 0.0);
    timings.phase_category_seconds.resize(plan.phases.size());
    phase_memory.resize(plan.phases.size(),
                        std::vector<planner::PhaseMemory>(static_cast<std::size_t>(hosted.n)));
    try {
      for (std::size_t p = 0; p < plan.phases.size(); ++p) {
        const auto& phase = plan.phases[p];
        where = fmt::format("phase '{}'", phase.name);
        const auto t0 = Clock::now();
        current_phase = p;
        for (auto& rep : replicas) rep->sampler.begin(rep->account);
        preload_on_io_thread = !preloads[p].empty() && use_io_thread(preload_bytes[p]);
        if (preload_on_io_thread && !io) io = std::make_unique<IoQueue>(hosted.n);
        run_ops(phase.ops, true);
        finish_preloads();
        timings.phase_seconds[p] += seconds_since(t0);
        for (std::size_t r = 0; r < replicas.size(); ++r) {
          const auto& m = replicas[r]->sampler.memory();
          auto& kept = phase_memory[p][r];
          if (m.peak > kept.peak || timings.steps == 0) kept = m;
        }
      }
    } catch (...) {
      try {
        finish_preloads();  // a piece in flight writes this engine's memory
      } catch (...) {       // the first error stands
      }
      batches = nullptr;
      throw;
    }
    batches = nullptr;
    ++timings.steps;
    timings.step_seconds.push_back(seconds_since(t_step));
  }

  // execution.io_schedule: preload. Which ops each phase loads ahead, and the IO thread's
  // job for them: replica r's preload loads of the current phase, timed.
  void index_preloads() {
    preloads.assign(plan.phases.size(), {});
    preload_bytes.assign(plan.phases.size(), 0);
    for (std::size_t p = 0; p < plan.phases.size(); ++p)
      for (const Op& op : plan.phases[p].ops)
        if (op.preload && op.kind == OpKind::kRemoteLoad) {
          preloads[p].push_back(&op);
          preload_bytes[p] += tensor(planner::the_tensor(op)).nbytes;
        }
    preload_job = [this](std::int64_t r) {
      Replica& rep = replica(r);
      const auto t0 = Clock::now();
      for (const Op* op : preloads[current_phase]) run_local(*op, r, 0);
      rep.preload_seconds = seconds_since(t0);
    };
  }

  // Waits for the preload pieces in flight; their time counts as remote IO (the slowest
  // replica's, on top of the compute it overlapped). The first error is rethrown.
  void finish_preloads() {
    std::exception_ptr first;
    double slowest = 0.0;
    for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r) {
      Replica& rep = replica(r);
      if (!rep.preload_posted) continue;
      rep.preload_posted = false;
      try {
        io->wait(local(r));
      } catch (...) {
        if (!first) first = std::current_exception();
      }
      slowest = std::max(slowest, rep.preload_seconds);
    }
    if (slowest > 0.0) add_seconds(OpCategory::kRemote, slowest);
    if (first) std::rethrow_exception(first);
  }

  void need_program(planner::Program want, const char* what) const {
    if (plan.program != want)
      throw Error("{} needs {} plan, but plan '{}' is {} plan", what,
                  want == planner::Program::kEval ? "an evaluation" : "a training", plan.name,
                  plan.program == planner::Program::kEval ? "an evaluation" : "a training");
  }

  double train_step(const BatchSource& source) {
    need_program(planner::Program::kTrain, "train_step");
    for (auto& rep : replicas)
      rep->losses.assign(static_cast<std::size_t>(plan.gradient_accumulation), 0.0);
    run_phases(source);
    ++steps_done;
    // Every replica's losses, in replica order on every rank (ranks host ascending blocks
    // of replicas), summed in that order as one process sums them.
    std::vector<double> mine;
    for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r) {
      const Replica& rep = device(r, n_stages - 1);  // the stage with the loss
      mine.insert(mine.end(), rep.losses.begin(), rep.losses.end());
    }
    const auto all = all_gather_values(*world, std::span<const double>(mine));
    const auto per = static_cast<std::size_t>(plan.gradient_accumulation);
    POPKIT_ASSERT(all.size() == per * static_cast<std::size_t>(n_replicas));
    last_losses.clear();
    double total = 0.0;
    for (std::size_t r = 0; r < static_cast<std::size_t>(n_replicas); ++r) {
      last_losses.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * per),
                               all.begin() + static_cast<std::ptrdiff_t>((r + 1) * per));
      for (double l : last_losses.back()) total += l;
    }
    return total / static_cast<double>(all.size());
  }

  // ---- variables ---------------------------------------------------------------------

  const Variable& variable(const std::string& name) const {
    if (const auto it = variable_index.find(name); it != variable_index.end())
      return plan.variables[static_cast<std::size_t>(it->second)];
    std::vector<std::string> names;
    for (const auto& v : plan.variables) names.push_back(v.name);
    throw Error("no variable '{}' in the plan (it has: {})", name, fmt::join(names, ", "));
  }

  // The bytes of the variable's home on replica r (its shard when sharded).
  std::byte* home(const Variable& v, std::int64_t r) const {
    if (v.remote) return replica(r).store->entry(v.buffer, v.entry);
    Replica& rep = holder(r, v.device_tensor);
    std::byte* p = rep.tensors[static_cast<std::size_t>(v.device_tensor)];
    if (!p) throw Error("variable '{}': its device tensor is not allocated", v.name);
    return p;
  }

  std::int64_t shard_rank(const Variable& v, std::int64_t r) const {
    return v.sharded ? plan.sharding_grouping.rank_in_group(r) : 0;
  }

  // The full values of `v` as replica r's group holds them. Each shard comes from the
  // member holding it through the world's all_gather, so a process reads only the
  // replicas it hosts; shard k's member precedes shard k+1's in replica order, so the
  // gathered shards are the flat tensor, padding last. Every rank must call it.
  std::vector<float> read_replica(const Variable& v, std::int64_t r) const {
    const std::int64_t n_shards = v.sharded ? plan.sharding_grouping.group_size : 1;
    const std::int64_t count = v.sharded ? v.shard_size : v.nelms;
    const std::int64_t group = plan.sharding_grouping.group_of(r);
    std::vector<float> mine;
    for (std::int64_t k = 0; k < n_shards; ++k) {
      const std::int64_t m = v.sharded ? plan.sharding_grouping.member(group, k) : r;
      if (!hosted.hosts(m)) continue;
      const std::byte* src = home(v, m);
      for (std::int64_t i = 0; i < count; ++i) {
        if (v.dtype == planner::DType::kFloat16)
          mine.push_back(static_cast<float>(reinterpret_cast<const Eigen::half*>(src)[i]));
        else
          mine.push_back(reinterpret_cast<const float*>(src)[i]);
      }
    }
    std::vector<float> full = all_gather_values(*world, std::span<const float>(mine));
    POPKIT_ASSERT(static_cast<std::int64_t>(full.size()) == n_shards * count);
    full.resize(static_cast<std::size_t>(v.nelms));
    return full;
  }

  void write_replica(const Variable& v, std::int64_t r, std::span<const float> full) {
    const std::int64_t k = shard_rank(v, r);
    std::byte* dst = home(v, r);
    const std::int64_t begin = k * v.shard_size;
    for (std::int64_t i = 0; i < v.shard_size; ++i) {
      const std::int64_t e = begin + i;
      const float x = e < v.nelms ? full[static_cast<std::size_t>(e)] : 0.0f;  // padding is zero
      if (v.dtype == planner::DType::kFloat16)
        reinterpret_cast<Eigen::half*>(dst)[i] = static_cast<Eigen::half>(x);
      else
        reinterpret_cast<float*>(dst)[i] = x;
    }
  }

  void write_group(const Variable& v, std::int64_t group, std::span<const float> values) {
    if (static_cast<std::int64_t>(values.size()) != v.nelms)
      throw Error("variable '{}' has shape {} ({} elements), got {} values", v.name,
                  shape_str(v.meta_shape), v.nelms, values.size());
    if (group < 0 || group >= plan.variables_grouping.n_groups())
      throw Error("variable '{}': group {} out of range ({} groups)", v.name, group,
                  plan.variables_grouping.n_groups());
    for (const auto r : plan.variables_grouping.members(group))
      if (hosted.hosts(r)) write_replica(v, r, values);
  }
};

Engine::Engine(const planner::Plan& plan, EngineOptions options)
    : Engine(planner::Plan(plan), std::move(options)) {}

Engine::Engine(planner::Plan&& plan, EngineOptions options)
    : impl_(std::make_unique<Impl>(std::move(plan), std::move(options))) {
  Impl& m = *impl_;
  m.optimizer.emplace(m.plan.optimizer);
  m.check_plan();
  m.n_replicas = m.plan.replication_factor;
  m.world = m.options.world ? m.options.world : process_world_shared();
  m.hosted = hosted_replicas(m.n_replicas, m.world->rank(), m.world->size());
  m.n_stages = m.plan.pipeline ? static_cast<std::int64_t>(m.plan.pipeline->stages.size()) : 1;
  if (m.n_stages > 1 && m.world->size() > 1)
    throw Error(
        "plan '{}' is pipelined: its stage workers run in one process (threads), not over "
        "{} MPI ranks; run it without mpirun",
        m.plan.name, m.world->size());
  std::vector<std::uint64_t> stage_blocks;  // pipelined: each stage's device block
  for (std::int64_t s = 0; s < m.n_stages && m.n_stages > 1; ++s)
    stage_blocks.push_back(planner::device_block_bytes(m.plan, static_cast<int>(s)));
  m.block_bytes = m.n_stages > 1 ? *std::max_element(stage_blocks.begin(), stage_blocks.end())
                                 : planner::device_block_bytes(m.plan);
  m.index_preloads();
  int threads = m.options.n_threads;
  // The host's cores are shared by the ranks on it.
  if (threads <= 0) threads = std::max(1, m.n_cores / std::max(1, m.world->local_size()));
  // Replicas >= threads: one replica per thread, each single-threaded. One replica: its
  // GEMMs use the threads (in_column_blocks).
  if (m.hosted.n > 1) threads = static_cast<int>(std::min<std::int64_t>(threads, m.hosted.n));
  if (m.n_stages > 1) threads = 1;  // a worker thread per device; GEMMs stay on it
  m.pool = std::make_unique<ThreadPool>(threads);
  m.intra_op = m.hosted.n == 1 && threads > 1;
  m.collectives =
      m.options.collectives
          ? m.options.collectives
          : std::shared_ptr<Collectives>(m.world->make_collectives(m.n_replicas, m.pool.get()));
  for (std::int64_t r = m.hosted.first; r < m.hosted.first + m.hosted.n; ++r)
    for (std::int64_t s = 0; s < m.n_stages; ++s) {
      const std::uint64_t bytes =
          m.n_stages > 1 ? stage_blocks[static_cast<std::size_t>(s)] : m.block_bytes;
      auto rep = std::make_unique<Impl::Replica>();
      rep->block = AlignedBlock(bytes);
      rep->fit.emplace(bytes);
      rep->tensors.resize(m.plan.tensors.size(), nullptr);
      rep->store = std::make_unique<RemoteStore>(m.plan.buffers);
      m.replicas.push_back(std::move(rep));
      if (m.n_stages > 1)
        for (int k = 0; k < 2; ++k) m.mailboxes.push_back(std::make_unique<Mailbox>());
    }
  for (std::int64_t s = 0; s < m.n_stages && m.n_stages > 1; ++s) {
    m.stage_collectives.push_back(m.world->make_collectives(m.n_replicas, nullptr));
    m.stage_barriers.push_back(std::make_unique<StageBarrier>(m.hosted.n));
  }
  if (m.n_stages > 1 && m.plan.sync_pattern != config::SyncPattern::kSinglePipeline) {
    m.cycles = planner::pipeline_cycles(m.plan);
    for (const auto& meeting : m.cycles->meetings)
      m.cycle_barriers.push_back(
          std::make_unique<StageBarrier>(static_cast<std::int64_t>(meeting.devices.size())));
  }
  m.setup();
}

Engine::~Engine() = default;

void Engine::initialize(const config::Init& init) {
  const FlushDenormals mode;  // the initial values round as the engine's threads would
  Impl& m = *impl_;
  for (const auto& v : m.plan.variables) {
    std::vector<float> values(static_cast<std::size_t>(v.nelms), 0.0f);
    if (v.role == VariableRole::kWeight || (v.role == VariableRole::kBias && !init.biases_zero))
      fill_normal(values.data(), v.nelms, init.weights_mean, init.weights_std,
                  name_key(v.name, init.seed));
    for (std::int64_t g = 0; g < m.plan.variables_grouping.n_groups(); ++g)
      m.write_group(v, g, values);
  }
  m.steps_done = 0;
}

double Engine::train_step(const BatchSource& batches) {
  const FlushDenormals mode;  // the caller computes too, as the pool's threads do
  return impl_->train_step(batches);
}

EvalResult Engine::evaluate(const Dataset& data) {
  const FlushDenormals mode;
  Impl& m = *impl_;
  m.need_program(planner::Program::kEval, "evaluate");
  if (data.image_size() != m.image_size)
    throw Error("evaluate: images of {} pixels but the plan's input shape {} needs {}",
                data.image_size(), shape_str(m.plan.input_shape), m.image_size);
  const auto t0 = Clock::now();
  const std::int64_t steps = m.plan.gradient_accumulation;
  const std::int64_t classes = m.plan.n_classes;
  EvalBatches batches(data, m.n_replicas, steps, m.plan.micro_batch_size);
  EvalResult result;
  double loss_sum = 0.0;
  std::vector<float> labels, dlogits;
  // Per micro-batch of the replicas hosted here: whether it had samples, its summed loss
  // and its correct count; gathered from every rank and added in replica and step order.
  std::vector<double> scored;
  for (std::int64_t b = 0; b < batches.n_batches(); ++b) {
    batches.set_batch(b);
    for (auto& rep : m.replicas) rep->logits.clear();
    m.run_phases(batches);
    // The host scores the valid rows of each micro-batch's logits, in replica and step
    // order, so the sums do not depend on the threads.
    scored.clear();
    for (std::int64_t r = m.hosted.first; r < m.hosted.first + m.hosted.n; ++r) {
      const auto& rep = m.device(r, m.n_stages - 1);  // the stage with the logits
      for (std::int64_t s = 0; s < steps; ++s) {
        const std::int64_t n = batches.valid(r, s);
        if (n == 0) {
          scored.insert(scored.end(), {0.0, 0.0, 0.0});
          continue;
        }
        if (static_cast<std::size_t>(s) >= rep.logits.size())
          throw Error("evaluate: plan '{}' streamed no logits at step {}", m.plan.name, s);
        const float* logits = rep.logits[static_cast<std::size_t>(s)].data();
        const MicroBatch mb = batches.micro_batch(r, s);
        for (std::int64_t i = 0; i < n; ++i)
          if (mb.labels[static_cast<std::size_t>(i)] >= classes)
            throw Error(
                "evaluate: label {} of replica {}'s sample {} at step {} is not a class "
                "below {}",
                mb.labels[static_cast<std::size_t>(i)], r, i, s, classes);
        labels.assign(mb.labels.begin(), mb.labels.begin() + n);
        dlogits.resize(static_cast<std::size_t>(n * classes));
        const double loss = static_cast<double>(m.kern.softmax_cross_entropy(
                                logits, labels.data(), dlogits.data(), n, classes)) *
                            static_cast<double>(n);
        std::int64_t correct = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const float* row = logits + i * classes;
          if (std::max_element(row, row + classes) - row == mb.labels[static_cast<std::size_t>(i)])
            ++correct;
        }
        scored.insert(scored.end(), {1.0, loss, static_cast<double>(correct)});
      }
    }
    const auto all = all_gather_values(*m.world, std::span<const double>(scored));
    for (std::size_t i = 0; i + 2 < all.size(); i += 3) {
      if (all[i] == 0.0) continue;
      loss_sum += all[i + 1];
      result.correct += static_cast<std::int64_t>(all[i + 2]);
    }
  }
  result.n = data.n;
  result.batches = batches.n_batches();
  result.seconds = seconds_since(t0);
  result.loss = data.n > 0 ? loss_sum / static_cast<double>(data.n) : 0.0;
  result.accuracy =
      data.n > 0 ? static_cast<double>(result.correct) / static_cast<double>(data.n) : 0.0;
  return result;
}

std::vector<float> Engine::read_variable(const std::string& name, std::int64_t group) const {
  const Impl& m = *impl_;
  if (group < 0 || group >= m.plan.variables_grouping.n_groups())
    throw Error("variable '{}': group {} out of range ({} groups)", name, group,
                m.plan.variables_grouping.n_groups());
  return m.read_replica(m.variable(name), m.plan.variables_grouping.member(group, 0));
}

std::vector<float> Engine::read_variable_of_replica(const std::string& name,
                                                    std::int64_t replica) const {
  const Impl& m = *impl_;
  if (replica < 0 || replica >= m.n_replicas)
    throw Error("variable '{}': replica {} out of range (R = {})", name, replica, m.n_replicas);
  return m.read_replica(m.variable(name), replica);
}

std::vector<std::vector<float>> Engine::retrieve_variable(const std::string& name) const {
  const Impl& m = *impl_;
  std::vector<std::vector<float>> out;
  if (m.plan.retrieval_mode == config::RetrievalMode::kAllReplicas) {
    for (std::int64_t r = 0; r < m.n_replicas; ++r)
      out.push_back(read_variable_of_replica(name, r));
  } else {
    for (std::int64_t g = 0; g < m.plan.variables_grouping.n_groups(); ++g)
      out.push_back(read_variable(name, g));
  }
  return out;
}

void Engine::write_variable(const std::string& name, std::span<const float> values) {
  Impl& m = *impl_;
  const Variable& v = m.variable(name);
  for (std::int64_t g = 0; g < m.plan.variables_grouping.n_groups(); ++g)
    m.write_group(v, g, values);
}

void Engine::write_variable(const std::string& name, std::int64_t group,
                            std::span<const float> values) {
  Impl& m = *impl_;
  m.write_group(m.variable(name), group, values);
}

std::vector<std::string> Engine::variable_names() const {
  std::vector<std::string> out;
  for (const auto& v : impl_->plan.variables) out.push_back(v.name);
  return out;
}

// Every replica's figures, gathered from the ranks hosting them (every rank must call it).
MemoryReport Engine::memory_report() const {
  const Impl& m = *impl_;
  World& world = *m.world;
  MemoryReport r;
  std::vector<std::uint64_t> peak, live, streaming;
  std::vector<planner::ClassBytes> by_class;
  // Per replica: its device's figures, or with a pipelined plan its largest stage's
  // (each device must hold its own; the plan's peak is the largest stage's too).
  for (std::int64_t rep = m.hosted.first; rep < m.hosted.first + m.hosted.n; ++rep) {
    std::uint64_t most = 0, most_live = 0;
    for (std::int64_t s = 0; s < m.n_stages; ++s) {
      most = std::max(most, m.device(rep, s).account.peak());
      most_live = std::max(most_live, m.device(rep, s).account.always_live());
    }
    peak.push_back(most);
    live.push_back(most_live);
    const auto& store = m.device(rep, 0).store->account();
    streaming.push_back(store.bytes);
    by_class.push_back(store.by_class);
  }
  r.peak_bytes = all_gather_values(world, std::span<const std::uint64_t>(peak));
  r.always_live_bytes = all_gather_values(world, std::span<const std::uint64_t>(live));
  r.streaming_bytes = all_gather_values(world, std::span<const std::uint64_t>(streaming));
  r.streaming_by_class = all_gather_values(world, std::span<const planner::ClassBytes>(by_class));
  for (const auto& phase : m.phase_memory)
    r.phases.push_back(all_gather_values(world, std::span<const planner::PhaseMemory>(phase)));
  return r;
}

const Timings& Engine::timings() const {
  return impl_->timings;
}

std::vector<BytesMoved> Engine::bytes_moved() const {
  const Impl& m = *impl_;
  std::vector<BytesMoved> mine;
  for (std::int64_t r = m.hosted.first; r < m.hosted.first + m.hosted.n; ++r) {
    BytesMoved b;
    for (std::int64_t s = 0; s < m.n_stages; ++s) {
      const auto& rep = m.device(r, s);
      b.host_in += rep.host_in.load();
      b.host_out += rep.host_out.load();
      b.remote_in += rep.remote_in.load();
      b.remote_out += rep.remote_out.load();
    }
    std::vector<Collectives*> all{m.collectives.get()};
    for (const auto& c : m.stage_collectives) all.push_back(c.get());
    for (Collectives* c : all) {
      b.collective_sent += c->bytes(r).sent;
      b.collective_received += c->bytes(r).received;
      b.cross_process_sent += c->cross_process_bytes(r).sent;
      b.cross_process_received += c->cross_process_bytes(r).received;
    }
    mine.push_back(b);
  }
  return all_gather_values(*m.world, std::span<const BytesMoved>(mine));
}

int Engine::rank() const {
  return impl_->world->rank();
}
int Engine::n_ranks() const {
  return impl_->world->size();
}
std::vector<int> Engine::replica_ranks() const {
  const Impl& m = *impl_;
  std::vector<int> out;
  for (std::int64_t r = 0; r < m.n_replicas; ++r)
    out.push_back(rank_of_replica(r, m.n_replicas, m.world->size()));
  return out;
}

const std::vector<std::vector<double>>& Engine::last_losses() const {
  return impl_->last_losses;
}
std::int64_t Engine::steps_done() const {
  return impl_->steps_done;
}
void Engine::set_steps_done(std::int64_t steps) {
  impl_->steps_done = steps;
}
const planner::Plan& Engine::plan() const {
  return impl_->plan;
}
std::uint64_t Engine::device_block_bytes() const {
  return impl_->block_bytes;
}

int Engine::n_threads() const {
  return impl_->pool->size();
}

void copy_weights(const Engine& from, Engine& to) {
  const planner::Plan& plan = to.plan();
  for (const Variable& v : plan.variables)
    for (std::int64_t g = 0; g < plan.variables_grouping.n_groups(); ++g)
      to.write_variable(v.name, g, from.read_variable(v.name, g));
}

}  // namespace popkit::engine
