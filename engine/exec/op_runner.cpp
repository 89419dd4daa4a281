// One op on one device, or a collective across the replicas (op_runner.h).
#include "engine/exec/op_runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "engine/layer_kinds.h"
#include "engine/runtime/float_mode.h"
#include "engine/tensor/layers.h"
#include "planner/element_blocks.h"
#include "planner/names.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"
#include "planner/workspace.h"

namespace popkit::engine {
namespace {

using planner::Op;
using planner::OpKind;
using planner::Stream;

// io_overlapped double buffering: odd repeat steps use the second slot.
int slot(const EngineState& m, int t, std::int64_t s) {
  const int second = m.tensor(t).double_buffer;
  return (s % 2 == 1 && second >= 0) ? second : t;
}

// A layer kind's view of one op on one device (engine/layer_kinds.h). Replica r at
// repeat step s holds the global batch's samples (s R + r) B + i (the host arrays'
// layout, engine/data/batch_source.h).
class Run final : public OpRun {
 public:
  Run(const OpRunner& runner, const EngineState& m, Device& dev, const Op& op, std::int64_t r,
      std::int64_t s)
      : runner_(runner), m_(m), dev_(dev), op_(op), s_(s) {
    seed = m.plan.seed;
    optimizer_step = m.steps_done + 1;
    first_sample = (s * m.n_replicas + r) * m.plan.micro_batch_size;
    repeat_step = s;
  }
  float* f32(int t) const override { return runner_.f32(dev_, t, s_, op_); }
  std::int64_t rows(int t) const override { return m_.tensor(t).shape[0]; }
  void in_column_blocks(std::int64_t rows_x_inner, std::int64_t n_cols,
                        const std::function<void(std::int64_t, std::int64_t)>& fn) const override {
    runner_.in_column_blocks(rows_x_inner, n_cols, fn);
  }
  void in_gemm_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols,
                     const std::function<void(const planner::GemmTile&)>& fn) const override {
    runner_.in_gemm_tiles(rows, inner, n_cols, fn);
  }
  void in_element_blocks(std::int64_t n,
                         const std::function<void(std::int64_t, std::int64_t)>& fn) const override {
    runner_.in_element_blocks(n, fn);
  }
  const Kernels& kernels() const override { return m_.kern; }
  float* workspace() const override {
    return op_.workspace >= 0 ? runner_.f32(dev_, op_.workspace, s_, op_) : nullptr;
  }
  std::uint64_t workspace_bytes() const override {
    return op_.workspace >= 0 ? m_.tensor(op_.workspace).nbytes : 0;
  }

 private:
  const OpRunner& runner_;
  const EngineState& m_;
  Device& dev_;
  const Op& op_;
  std::int64_t s_;
};

}  // namespace

std::byte* OpRunner::raw(Device& dev, int t, std::int64_t s, const Op& op) const {
  const int k = slot(m_, t, s);
  std::byte* p = dev.tensors[static_cast<std::size_t>(k)];
  if (!p)
    throw Error("{}, op '{}' ({}): tensor '{}' is not allocated", m_.where, op.label,
                planner::op_kind_name(op.kind), m_.tensor(k).name);
  return p;
}

std::int64_t OpRunner::entry_of(const Op& op, std::int64_t s) const {
  if (op.entry >= 0) return op.entry;
  return m_.plan.buffers[static_cast<std::size_t>(op.buffer)].flat_index(op.row, s);
}

// Blocks [0, blocks) as `tasks` tasks of the pool when one replica has the threads (task
// r runs blocks r, r + tasks, ... one after the other: the blocks that share a region of
// the workspace), else one after the other here.
void OpRunner::on_pool(std::int64_t blocks, std::int64_t tasks,
                       const std::function<void(std::int64_t)>& block) const {
  if (blocks > 1 && m_.schedule.spread_gemms) {
    m_.pool->run(tasks, [&](std::int64_t r) {
      for (std::int64_t b = r; b < blocks; b += tasks) block(b);
    });
    return;
  }
  for (std::int64_t b = 0; b < blocks; ++b) block(b);
}

// In kColumnBlock blocks when the GEMM is large enough (rows x inner x cols >= 2^18
// multiply-adds), else at once. The blocks depend on the shapes only
// (planner::column_blocks, which the workspace is sized by).
void OpRunner::in_column_blocks(std::int64_t rows_x_inner, std::int64_t n_cols,
                                const std::function<void(std::int64_t, std::int64_t)>& fn) const {
  const planner::ColumnBlocks cb = planner::column_blocks(rows_x_inner, n_cols);
  if (cb.n == 1) {
    fn(0, n_cols);
    return;
  }
  on_pool(cb.n, cb.regions(),
          [&](std::int64_t k) { fn(k * cb.width, std::min(n_cols, (k + 1) * cb.width)); });
}

// The same over a linear GEMM's tiles (planner::gemm_tiles).
void OpRunner::in_gemm_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols,
                             const std::function<void(const planner::GemmTile&)>& fn) const {
  const planner::ColumnBlocks cb = planner::gemm_tiles(rows, inner, n_cols);
  on_pool(cb.blocks(), cb.regions(),
          [&](std::int64_t b) { fn(planner::gemm_tile(cb, b, rows, n_cols)); });
}

// The same for an element-wise pass: a task of the pool a block.
void OpRunner::in_element_blocks(std::int64_t n,
                                 const std::function<void(std::int64_t, std::int64_t)>& fn) const {
  const planner::ElementBlocks eb = planner::element_blocks(n);
  if (eb.n == 1 || !m_.schedule.spread_gemms) {
    fn(0, n);  // a pass not spread needs no cut
    return;
  }
  on_pool(eb.n, eb.n, [&](std::int64_t k) { fn(k * eb.width, std::min(n, (k + 1) * eb.width)); });
}

void OpRunner::run_on(Device& dev, const Op& op, std::int64_t r, std::int64_t s) const {
  if (!m_.gate.before(op.kind, m_.steps_done + 1)) return;
  switch (op.kind) {
    case OpKind::kAlloc:
      return allocate(dev, op);
    case OpKind::kFree:
      return release(dev, op);
    case OpKind::kZero: {
      const int t = planner::the_tensor(op);
      std::memset(raw(dev, t, s, op), 0, m_.tensor(t).nbytes);
      return;
    }
    case OpKind::kRemoteLoad:
    case OpKind::kRemoteStore:
      return remote_copy(dev, op, s);
    case OpKind::kHostLoad:
      return host_load(op, dev, r, s);
    case OpKind::kHostStore:
      return host_store(op, dev, s);
    case OpKind::kForward: {
      const auto& l = m_.plan.layers[static_cast<std::size_t>(op.layer)];
      layer_kernel(l.kind).forward(op, l, Run(*this, m_, dev, op, r, s));
      return;
    }
    case OpKind::kLoss:
      return loss(op, dev, r, s);
    case OpKind::kBackward: {
      const auto& l = m_.plan.layers[static_cast<std::size_t>(op.layer)];
      layer_kernel(l.kind).backward(op, l, Run(*this, m_, dev, op, r, s));
      return;
    }
    case OpKind::kOptimizerStep:
      return optimizer_step(op, dev, r, s);
    case OpKind::kAdd: {
      const int sum_t = op.state[planner::add_operand::kSum];
      float* sum = f32(dev, sum_t, s, op);
      const float* addend = f32(dev, op.inputs[planner::add_operand::kAddend], s, op);
      for (std::int64_t i = 0, n = m_.tensor(sum_t).nelms; i < n; ++i) sum[i] += addend[i];
      return;
    }
    default:
      POPKIT_ASSERT(false);
  }
}

void OpRunner::allocate(Device& dev, const Op& op) const {
  const int t = planner::the_tensor(op);
  const auto& d = m_.tensor(t);
  auto& ptr = dev.tensors[static_cast<std::size_t>(t)];
  if (ptr) throw Error("{}, op '{}': tensor '{}' is already allocated", m_.where, op.label, d.name);
  const std::uint64_t at = dev.fit->allocate(d.nbytes);
  // The block was sized by replaying this plan's allocs and frees; only a plan the
  // replay skipped (an alloc of a live tensor) could get here.
  if (at == planner::FirstFit::kNone)
    throw Error("{}, op '{}': no room for tensor '{}' ({} bytes) in the replica's {} bytes",
                m_.where, op.label, d.name, d.nbytes, m_.block_bytes);
  ptr = dev.block.data() + at;
  if (m_.options.poison_new_tensors) std::memset(ptr, 0xFF, d.nbytes);
  dev.account.allocate(d.nbytes, d.cls, d.always_live);
}

void OpRunner::release(Device& dev, const Op& op) const {
  const int t = planner::the_tensor(op);
  const auto& d = m_.tensor(t);
  auto& ptr = dev.tensors[static_cast<std::size_t>(t)];
  if (!ptr)
    throw Error("{}, op '{}': frees '{}', which is not allocated", m_.where, op.label, d.name);
  dev.fit->release(static_cast<std::uint64_t>(ptr - dev.block.data()), d.nbytes);
  ptr = nullptr;
  dev.account.release(d.nbytes, d.cls, d.always_live);
}

void OpRunner::remote_copy(Device& dev, const Op& op, std::int64_t s) const {
  const int t = planner::the_tensor(op);
  const auto n = m_.tensor(t).nbytes;
  std::byte* data = raw(dev, t, s, op);
  if (op.kind == OpKind::kRemoteLoad) {
    dev.store->load(op.buffer, entry_of(op, s), data, n);
    dev.remote_in.fetch_add(n, std::memory_order_relaxed);
  } else {
    dev.store->store(op.buffer, entry_of(op, s), data, n);
    dev.remote_out.fetch_add(n, std::memory_order_relaxed);
  }
}

void OpRunner::host_load(const Op& op, Device& dev, std::int64_t r, std::int64_t s) const {
  if (m_.batches == nullptr)
    throw Error("{}, op '{}': host_load outside train_step (no batch source)", m_.where, op.label);
  const MicroBatch mb = m_.batches->micro_batch(r, s);
  const std::int64_t want = m_.plan.micro_batch_size, positions = m_.plan.positions;
  const auto& t = m_.tensor(planner::the_tensor(op));
  if (mb.size != want || static_cast<std::int64_t>(mb.labels.size()) != want * positions ||
      static_cast<std::int64_t>(mb.pixels.size()) != want * m_.image_size)
    throw Error(
        "host_load: the micro-batch of replica {} at step {} has {} samples, {} labels and {} "
        "pixels, but the plan's tensor '{}' has shape {} ({} samples of {} pixels, {} labels "
        "each)",
        r, s, mb.size, mb.labels.size(), mb.pixels.size(), t.name, shape_str(t.shape), want,
        m_.image_size, positions);
  float* dst = f32(dev, planner::the_tensor(op), s, op);
  if (op.stream == Stream::kImages && m_.tokens) {
    // Token ids, exact in float32 (the embedding reads them as ids).
    std::transform(mb.pixels.begin(), mb.pixels.end(), dst,
                   [](std::uint8_t id) { return static_cast<float>(id); });
  } else if (op.stream == Stream::kImages) {
    normalize_pixels(mb.pixels.data(), mb.pixels.size(), m_.options.normalize_mean,
                     m_.options.normalize_std, dst);
  } else {
    for (std::size_t i = 0; i < mb.labels.size(); ++i) {
      if (mb.labels[i] >= m_.plan.n_classes)
        throw Error("host_load: label {} of replica {} at step {} is not a class below {}",
                    mb.labels[i], r, s, m_.plan.n_classes);
      dst[i] = static_cast<float>(mb.labels[i]);
    }
  }
  dev.host_in.fetch_add(t.nbytes, std::memory_order_relaxed);
}

// The loss of each accumulation step, or an evaluation's logits of each repeat step.
void OpRunner::host_store(const Op& op, Device& dev, std::int64_t s) const {
  const int t = planner::the_tensor(op);
  const auto i = static_cast<std::size_t>(s);
  if (op.stream == Stream::kLogits) {
    if (i >= dev.logits.size()) dev.logits.resize(i + 1);
    const float* src = f32(dev, t, s, op);
    dev.logits[i].assign(src, src + m_.tensor(t).nelms);
  } else {
    if (i >= dev.losses.size()) dev.losses.resize(i + 1, 0.0);
    dev.losses[i] = *f32(dev, t, s, op);
  }
  dev.host_out.fetch_add(m_.tensor(t).nbytes, std::memory_order_relaxed);
}

void OpRunner::loss(const Op& op, Device& dev, std::int64_t r, std::int64_t s) const {
  namespace lo = planner::loss_operand;
  const int logits = op.inputs[lo::kLogits], loss_t = op.outputs[lo::kLoss];
  // A language model's sample is plan.positions rows of the loss (plan.h's kLoss).
  const std::int64_t n = m_.tensor(logits).shape[0] * m_.plan.positions;
  const float loss = m_.kern.softmax_cross_entropy(
      f32(dev, logits, s, op), f32(dev, op.inputs[lo::kLabels], s, op),
      f32(dev, op.outputs[lo::kDlogits], s, op), n, m_.plan.n_classes);
  *f32(dev, loss_t, s, op) = loss;
  if (m_.options.check_finite && !std::isfinite(loss))
    throw Error("optimizer step {}, {}: the loss '{}' of replica {} at accumulation step {} is {}",
                m_.steps_done + 1, m_.where, m_.tensor(loss_t).name, r, s, loss);
}

void OpRunner::optimizer_step(const Op& op, Device& dev, std::int64_t r, std::int64_t s) const {
  using R = planner::OperandRole;
  const config::Optimizer& o = m_.plan.optimizer;
  const int weight = planner::optimizer_operand(op, o, R::kParam);
  const int grad = planner::optimizer_operand(op, o, R::kGrad);
  const std::int64_t n = m_.tensor(weight).nelms;
  const float* g = f32(dev, grad, s, op);
  // The scan in element blocks too; the first bad element is found again in order.
  std::atomic<bool> bad{false};
  if (m_.options.check_finite)
    in_element_blocks(n, [&](std::int64_t i0, std::int64_t i1) {
      if (any_non_finite(g + i0, i1 - i0)) bad.store(true, std::memory_order_relaxed);
    });
  if (bad.load(std::memory_order_relaxed)) {
    for (std::int64_t i = 0; i < n; ++i)
      if (!std::isfinite(g[i]))
        throw Error("optimizer step {}, {}: the gradient '{}' of replica {} is {} at element {}",
                    m_.steps_done + 1, m_.where, m_.tensor(grad).name, r, g[i], i);
  }
  // The optimizer's state in its kind's order (planner/optimizer_kinds.h), held here
  // without allocating: at most kMaxState tensors.
  constexpr std::size_t kMaxState = 4;
  std::array<std::byte*, kMaxState> state{};
  std::array<config::DType, kMaxState> dtypes{};
  const std::size_t n_state = op.state.size() - 1;  // all but the weight
  POPKIT_ASSERT(n_state <= state.size());
  for (std::size_t i = 0; i < n_state; ++i) {
    const int t = planner::optimizer_operand(op, o, R::kState, static_cast<int>(i));
    state[i] = raw(dev, t, s, op);
    dtypes[i] = m_.tensor(t).dtype;
  }
  // Element by element (optimizer.h), so in element blocks: each block's state at its
  // offset in the state's own dtype.
  float* w = f32(dev, weight, s, op);
  in_element_blocks(n, [&](std::int64_t i0, std::int64_t i1) {
    std::array<std::byte*, kMaxState> at{};
    for (std::size_t i = 0; i < n_state; ++i)
      at[i] = state[i] + i0 * planner::dtype_size(dtypes[i]);
    m_.optimizer->step(m_.kern, w + i0, g + i0, std::span(at).first(n_state),
                       std::span<const config::DType>(dtypes).first(n_state), i1 - i0,
                       m_.steps_done + 1);  // t incremented before use
  });
}

std::vector<ReplicaBuffer> OpRunner::buffers_of(int t, std::int64_t s, const Op& op) const {
  std::vector<ReplicaBuffer> out;
  out.reserve(static_cast<std::size_t>(m_.hosted.n));
  const int k = slot(m_, t, s);
  for (std::int64_t r = m_.hosted.first; r < m_.hosted.first + m_.hosted.n; ++r)
    out.push_back({r, raw(m_.holder(r, k), t, s, op), m_.tensor(k).nelms, m_.tensor(k).dtype});
  return out;
}

// A pipelined plan's stages reduce among themselves, each with its own collectives, on
// the stage that holds the op's first operand.
Collectives* OpRunner::collectives_of(const Op& op) const {
  if (m_.n_stages == 1) return m_.collectives.get();
  const int t = op.inputs.empty() ? planner::the_tensor(op) : op.inputs[0];
  return m_.stage_collectives[static_cast<std::size_t>(std::max(0, m_.tensor(t).stage))].get();
}

void OpRunner::run_collective(const Op& op, std::int64_t s) const {
  (void)m_.gate.before(op.kind, m_.steps_done + 1, /*may_skip=*/false);
  namespace so = planner::shard_operand;
  Collectives* group = collectives_of(op);
  switch (op.kind) {
    case OpKind::kAllReduce:
      group->all_reduce(op.grouping, op.reduce, buffers_of(planner::the_tensor(op), s, op));
      break;
    case OpKind::kReduceScatter:
      group->reduce_scatter(op.grouping, op.shard_grouping, op.reduce,
                            buffers_of(op.inputs[so::kSrc], s, op),
                            buffers_of(op.outputs[so::kDst], s, op));
      break;
    case OpKind::kAllGather:
      group->all_gather(op.grouping, buffers_of(op.inputs[so::kSrc], s, op),
                        buffers_of(op.outputs[so::kDst], s, op));
      break;
    case OpKind::kSliceShard:
      group->slice_shard(op.grouping, buffers_of(op.inputs[so::kSrc], s, op),
                         buffers_of(op.outputs[so::kDst], s, op));
      break;
    default:
      POPKIT_ASSERT(false);
  }
}

}  // namespace popkit::engine
