// A plan checked op by op before the engine runs it (plan_check.h).
#include "engine/exec/plan_check.h"

#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "config/names.h"
#include "engine/exec/state.h"
#include "engine/layer_kinds.h"
#include "planner/layer_ops.h"
#include "planner/names.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"

namespace popkit::engine {
namespace {

using planner::Op;
using planner::OpKind;
using planner::Stream;

class PlanChecker {
 public:
  explicit PlanChecker(const planner::Plan& plan)
      : plan_(plan), optimizer_state_(planner::optimizer_state(plan.optimizer)) {
    image_size_ = std::accumulate(plan.input_shape.begin(), plan.input_shape.end(), std::int64_t{1},
                                  std::multiplies<>());
  }

  void check() {
    check_fits();
    for (const auto& t : plan_.tensors) {
      const std::int64_t n =
          std::accumulate(t.shape.begin(), t.shape.end(), std::int64_t{1}, std::multiplies<>());
      if (n != t.nelms ||
          t.nbytes != static_cast<std::uint64_t>(t.nelms * planner::dtype_size(t.dtype)))
        throw Error("plan: tensor '{}' has shape {} ({} elements) but nelms {} and nbytes {}",
                    t.name, shape_str(t.shape), n, t.nelms, t.nbytes);
    }
    for (const planner::LayerInfo& l : plan_.layers) {
      if (layer_kernel(l.kind).forward == nullptr)
        throw Error("plan: layer {}: poprun has no kernels for {} layers yet (popplan plans them)",
                    l.name, l.kind);
      if (const std::string e = planner::layer_error(l); !e.empty()) throw Error("plan: {}", e);
    }
    where_ = "setup";
    for (const Op& op : plan_.setup) check_op(op);
    for (const auto& ph : plan_.phases) {
      where_ = fmt::format("phase '{}'", ph.name);
      for (const Op& op : ph.ops) check_op(op);
    }
  }

 private:
  const planner::DeviceTensor& tensor(int t) const {
    return plan_.tensors[static_cast<std::size_t>(t)];
  }

  void check_fits() const {
    if (!plan_.fits) {
      const auto& nf = plan_.not_fitting;
      throw Error(
          "plan '{}' does not fit device memory ({} bytes per replica): phase '{}' needs {} bytes "
          "more; largest tensors: {}; suggestions: {}",
          plan_.name, plan_.memory_per_replica, nf.phase, nf.bytes_over,
          fmt::join(nf.largest, ", "), fmt::join(nf.suggestions, "; "));
    }
    if (plan_.replication_factor < 1)
      throw Error("plan: replication factor {} < 1", plan_.replication_factor);
    if (plan_.pipeline && !plan_.buffers.empty())
      throw Error("plan '{}' is pipelined with remote buffers, which its stages do not share",
                  plan_.name);
  }

  void need_index(int t, const Op& op, const char* field) const {
    if (t < 0 || static_cast<std::size_t>(t) >= plan_.tensors.size())
      throw Error("plan: {}, op '{}' ({}): {} is tensor {}, out of range", where_, op.label,
                  planner::op_kind_name(op.kind), field, t);
  }

  // The tensor `t` must have shape `want` (and be float32).
  void need_shape(int t, const Op& op, const std::vector<std::int64_t>& want,
                  const char* what) const {
    need_index(t, op, what);
    const auto& d = tensor(t);
    if (d.shape != want)
      throw Error("plan: {}, op '{}' ({}): tensor '{}' has shape {} but {} needs {}", where_,
                  op.label, planner::op_kind_name(op.kind), d.name, shape_str(d.shape), what,
                  shape_str(want));
    if (d.dtype != planner::DType::kFloat32)
      throw Error("plan: {}, op '{}': tensor '{}' must be float32", where_, op.label, d.name);
  }

  const planner::LayerInfo& layer_of(const Op& op) const {
    if (op.layer < 0 || static_cast<std::size_t>(op.layer) >= plan_.layers.size())
      throw Error("plan: {}, op '{}': layer {} out of range", where_, op.label, op.layer);
    return plan_.layers[static_cast<std::size_t>(op.layer)];
  }

  std::int64_t rows_of(int t, const Op& op, const char* what) const {
    need_index(t, op, what);
    const auto& d = tensor(t);
    if (d.shape.size() != 2)
      throw Error("plan: {}, op '{}': tensor '{}' has shape {}, {} needs a matrix", where_,
                  op.label, d.name, shape_str(d.shape), what);
    return d.shape[0];
  }

  void check_op(const Op& op) {
    // The positions of the op's kind, every operand a tensor of the plan.
    const planner::OpSignature sig = planner::op_signature(op, plan_);
    if (const std::string error = planner::operand_count_error(op, plan_); !error.empty())
      throw Error("plan: {}, op '{}': {}", where_, op.label, error);
    auto positions = [&](const std::vector<int>& got, std::span<const planner::Operand> want) {
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] >= 0) need_index(got[i], op, std::string(want[i].name).c_str());
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
      case OpKind::kRemoteStore:
        check_remote(op);
        break;
      case OpKind::kHostLoad:
      case OpKind::kHostStore:
        check_host(op);
        break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kSliceShard:
        check_shards(op);
        break;
      case OpKind::kForward:
      case OpKind::kBackward:
        check_layer_op(op);
        break;
      case OpKind::kLoss:
        check_loss(op);
        break;
      case OpKind::kOptimizerStep:
        check_optimizer_step(op);
        break;
      case OpKind::kRepeat:
        check_repeat(op);
        break;
      case OpKind::kSend:
      case OpKind::kRecv:
        check_stage_copy(op);
        break;
      case OpKind::kAdd:
        check_add(op);
        break;
    }
  }

  // sum += addend: two float32 tensors of one size.
  void check_add(const Op& op) const {
    const int sum = op.state[planner::add_operand::kSum];
    const int addend = op.inputs[planner::add_operand::kAddend];
    need_shape(addend, op, tensor(sum).shape, "addend");
    need_shape(sum, op, tensor(sum).shape, "sum");
  }

  // Every operand of a layer's op at the shape its kind declares (planner/layer_ops.h),
  // on the rows of the op's first input: no kind writes checks of its own.
  void check_layer_op(const Op& op) const {
    const planner::LayerInfo& l = layer_of(op);
    const int first = op.inputs.empty() ? -1 : op.inputs[0];
    need_index(first, op, "the first input");
    const planner::Shape& first_shape = tensor(first).shape;
    if (first_shape.empty())
      throw Error("plan: {}, op '{}': tensor '{}' is a scalar, the first input needs rows", where_,
                  op.label, tensor(first).name);
    for (const planner::OperandNeed& need : planner::operand_needs(op, l, first_shape[0])) {
      if (need.tensor >= 0)
        need_shape(need.tensor, op, need.shape, need.what.c_str());
      else if (need.required)
        throw Error("plan: {}, op '{}': layer {}: {} is missing", where_, op.label, l.name,
                    need.what);
    }
  }

  void check_remote(const Op& op) const {
    const int t = planner::the_tensor(op);
    need_index(t, op, "tensor");
    if (op.buffer < 0 || static_cast<std::size_t>(op.buffer) >= plan_.buffers.size())
      throw Error("plan: {}, op '{}': remote buffer {} out of range", where_, op.label, op.buffer);
    const auto& b = plan_.buffers[static_cast<std::size_t>(op.buffer)];
    if (tensor(t).nbytes != b.entry_bytes)
      throw Error(
          "plan: {}, op '{}': tensor '{}' has {} bytes but remote buffer '{}' has entries of "
          "{}",
          where_, op.label, tensor(t).name, tensor(t).nbytes, b.name, b.entry_bytes);
  }

  void check_host(const Op& op) const {
    const std::int64_t mb = plan_.micro_batch_size;
    const int t = planner::the_tensor(op);
    if (op.kind == OpKind::kHostLoad) {
      if (op.stream == Stream::kImages)
        need_shape(t, op, {mb, image_size_}, "the images stream");
      else if (op.stream == Stream::kLabels && plan_.positions > 1)  // a label a position
        need_shape(t, op, {mb, plan_.positions}, "the labels stream");
      else if (op.stream == Stream::kLabels)
        need_shape(t, op, {mb}, "the labels stream");
      else
        throw Error("plan: {}, op '{}': host_load of the loss stream", where_, op.label);
      return;
    }
    need_index(t, op, "tensor");
    if (op.stream == Stream::kLogits) {
      need_shape(t, op, {mb, plan_.positions * plan_.n_classes}, "the logits stream");
      return;
    }
    if (op.stream != Stream::kLoss || tensor(t).nelms != 1)
      throw Error("plan: {}, op '{}': host_store takes the 1-element loss or the logits", where_,
                  op.label);
  }

  // all_gather fills the destination from the group's shards; reduce_scatter and
  // slice_shard cut the source into the group's shards.
  void check_shards(const Op& op) const {
    namespace so = planner::shard_operand;
    const int src = op.inputs[so::kSrc], dst = op.outputs[so::kDst];
    need_index(src, op, "src");
    need_index(dst, op, "dst");
    if (op.kind == OpKind::kAllGather) {
      if (tensor(dst).nelms > tensor(src).nelms * op.grouping.group_size)
        throw Error("plan: {}, op '{}': all_gather of '{}' ({} x {}) cannot fill '{}' ({})", where_,
                    op.label, tensor(src).name, op.grouping.group_size, tensor(src).nelms,
                    tensor(dst).name, tensor(dst).nelms);
      return;
    }
    const auto& g = op.kind == OpKind::kSliceShard ? op.grouping : op.shard_grouping;
    if (tensor(dst).nelms * g.group_size < tensor(src).nelms)
      throw Error("plan: {}, op '{}': {} shards of {} elements cannot hold '{}' ({} elements)",
                  where_, op.label, g.group_size, tensor(dst).nelms, tensor(src).name,
                  tensor(src).nelms);
  }

  void check_loss(const Op& op) const {
    namespace lo = planner::loss_operand;
    const int logits = op.inputs[lo::kLogits], loss = op.outputs[lo::kLoss];
    const std::int64_t n = rows_of(logits, op, "the logits"), P = plan_.positions;
    const std::int64_t width = P * plan_.n_classes;
    need_shape(logits, op, {n, width}, "the logits");
    if (P == 1)
      need_shape(op.inputs[lo::kLabels], op, {n}, "the labels");
    else
      need_shape(op.inputs[lo::kLabels], op, {n, P}, "the labels");
    need_shape(op.outputs[lo::kDlogits], op, {n, width}, "the logits' gradient");
    need_index(loss, op, "loss");
    if (tensor(loss).nelms != 1)
      throw Error("plan: {}, op '{}': the loss '{}' has {} elements, not 1", where_, op.label,
                  tensor(loss).name, tensor(loss).nelms);
  }

  // The weight, its gradient and the state the optimizer's kind declares
  // (planner/optimizer_kinds.h), each of the weight's elements and its declared dtype.
  void check_optimizer_step(const Op& op) const {
    using R = planner::OperandRole;
    const int weight = planner::optimizer_operand(op, plan_.optimizer, R::kParam);
    const int grad = planner::optimizer_operand(op, plan_.optimizer, R::kGrad);
    need_index(weight, op, "weight");
    need_index(grad, op, "grad");
    const std::int64_t n = tensor(weight).nelms;
    const std::span<const planner::Operand> operands =
        planner::optimizer_step_state(plan_.optimizer);
    for (std::size_t i = 0; i < op.state.size(); ++i) {
      const int t = op.state[i];
      need_index(t, op, "state");
      if (tensor(t).nelms != n)
        throw Error("plan: {}, op '{}': '{}' has {} elements but the weight '{}' has {}", where_,
                    op.label, tensor(t).name, tensor(t).nelms, tensor(weight).name, n);
      const planner::Operand& o = operands[i];
      const planner::DType want = o.role == R::kState
                                      ? optimizer_state_[static_cast<std::size_t>(o.index)].dtype
                                      : planner::DType::kFloat32;
      if (tensor(t).dtype != want)
        throw Error("plan: {}, op '{}': '{}' must be {}", where_, op.label, tensor(t).name,
                    enum_name(want));
    }
    if (tensor(grad).nelms != n || tensor(grad).dtype != planner::DType::kFloat32)
      throw Error("plan: {}, op '{}': the gradient '{}' must be float32 of {} elements", where_,
                  op.label, tensor(grad).name, n);
  }

  void check_repeat(const Op& op) {
    if (op.steps < 1)
      throw Error("plan: {}, op '{}': repeat of {} steps", where_, op.label, op.steps);
    for (const Op& inner : op.body) {
      if (inner.kind == OpKind::kAlloc || inner.kind == OpKind::kFree ||
          inner.kind == OpKind::kRepeat)
        throw Error("plan: {}, op '{}': a repeat body holds a {}", where_, op.label,
                    planner::op_kind_name(inner.kind));
      check_op(inner);
    }
  }

  // A copy between a stage's tensor and a receive buffer of equal size (the planner's
  // walk has checked which stage holds which).
  void check_stage_copy(const Op& op) const {
    const int src = op.inputs[planner::shard_operand::kSrc];
    const int dst = op.outputs[planner::shard_operand::kDst];
    if (!plan_.pipeline || op.peer < 0 ||
        op.peer >= static_cast<int>(plan_.pipeline->stages.size()))
      throw Error("plan: {}, op '{}': a {} needs a pipelined plan and a peer stage", where_,
                  op.label, planner::op_kind_name(op.kind));
    if (tensor(src).nbytes != tensor(dst).nbytes)
      throw Error("plan: {}, op '{}': copies {} bytes into {}", where_, op.label,
                  tensor(src).nbytes, tensor(dst).nbytes);
  }

  const planner::Plan& plan_;
  // What the optimizer's kind keeps per weight (planner/optimizer_kinds.h), in the order
  // of the step's state after the weight.
  std::vector<planner::OptimizerState> optimizer_state_;
  std::int64_t image_size_ = 1;
  std::string where_ = "setup";
};

}  // namespace

void check_plan(const planner::Plan& plan) {
  PlanChecker(plan).check();
}

}  // namespace popkit::engine
