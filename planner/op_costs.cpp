// FLOPs and bytes per op (cost.h annotate_costs): what each op computes and moves, for
// one replica, counted from its operands.
#include <algorithm>

#include "planner/cost.h"
#include "planner/layer_kinds.h"
#include "planner/layer_ops.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"

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
      case OpKind::kSend:  // to another pipeline stage (a neighbour, or a tied weight's)
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
        const LayerInfo& l = layer(op.layer);
        const LayerKind& kind = layer_kind(l.kind);
        op.flops = kind.forward_flops(l, rows(layer_operand(op, kind, OperandRole::kIn)));
        break;
      }
      case OpKind::kLoss: {
        // softmax (exp, sum, divide), log, and the gradient: about 5 per logit.
        op.flops = 5 * u(nelms(op.inputs[loss_operand::kLogits]));
        break;
      }
      case OpKind::kBackward: {
        // Rows are the output gradient's: a micro-batch, as the kind declares it.
        const LayerInfo& l = layer(op.layer);
        const LayerKind& kind = layer_kind(l.kind);
        op.flops = kind.backward_flops(l, rows(layer_operand(op, kind, OperandRole::kDy)),
                                       layer_operand(op, kind, OperandRole::kDx) >= 0);
        break;
      }
      case OpKind::kOptimizerStep:
        op.flops = optimizer_flops_per_element(plan_.optimizer) *
                   u(nelms(optimizer_operand(op, plan_.optimizer, OperandRole::kParam)));
        break;
      case OpKind::kAdd:
        op.flops = u(nelms(op.state[add_operand::kSum]));
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

}  // namespace

void annotate_costs(Plan& plan) {
  Costs costs(plan);
  for (Op& op : plan.setup) costs.annotate(op);
  for (Phase& ph : plan.phases)
    for (Op& op : ph.ops) costs.annotate(op);
}

}  // namespace popkit::planner
