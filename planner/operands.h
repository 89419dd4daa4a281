// The operands of each op kind by position (plan.h's Op): the one place that says which
// tensor of an op's inputs, outputs and state is which. The plan writer and reader, the
// text printer, the memory walk, the cost model and the engine's checks walk operands
// through op_signature and for_each_operand; builders and kernels name positions with
// the constants below, and a layer's by role (planner/layer_ops.h, layer_operand).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "planner/layer_kinds.h"
#include "planner/plan.h"

namespace popkit::planner {

// Single-tensor kinds keep their tensor at position 0: in outputs (alloc, zero,
// remote_load, host_load), inputs (free, remote_store, host_store) or state (all_reduce).
inline constexpr std::size_t kTheTensor = 0;

// all_gather, reduce_scatter, slice_shard, send, recv: inputs {src}, outputs {dst}.
namespace shard_operand {
inline constexpr std::size_t kSrc = 0;
inline constexpr std::size_t kDst = 0;
}  // namespace shard_operand

// forward and backward: the positions the layer's kind declares (planner/layer_kinds.h),
// found by role with layer_operand (planner/layer_ops.h).

// loss: inputs {logits, labels}, outputs {loss, dlogits}.
namespace loss_operand {
inline constexpr std::size_t kLogits = 0, kLabels = 1;
inline constexpr std::size_t kLoss = 0, kDlogits = 1;
}  // namespace loss_operand

// add: inputs {addend}, state {sum}.
namespace add_operand {
inline constexpr std::size_t kAddend = 0, kSum = 0;
}  // namespace add_operand

// optimizer_step: inputs {grad}, state the positions the optimizer's kind declares
// (planner/optimizer_kinds.h), found by role with optimizer_operand.

// The operands of an op's positions, by name. A forward or backward follows its layer's
// kind; an optimizer step's state follows the plan's optimizer (weight, adam_m, adam_v
// for Adam). A layer index out of range counts as linear (the walk reports it).
struct OpSignature {
  std::span<const Operand> inputs;
  std::span<const Operand> outputs;
  std::span<const Operand> state;
};
OpSignature op_signature(const Op& op, const Plan& plan);

// What is wrong with the lengths of the op's operand lists, or "" when each has its
// kind's positions: "has 2 inputs but a forward takes 3 (in, weight, bias)".
[[nodiscard]] std::string operand_count_error(const Op& op, const Plan& plan);

// The single tensor of alloc, free, zero, remote and host loads and stores, all_reduce.
[[nodiscard]] int the_tensor(const Op& op);

// fn(tensor) over every operand in use (>= 0): inputs, outputs, state, then the
// workspace, which must be live around the op like any operand.
template <typename Fn>
void for_each_operand(const Op& op, Fn&& fn) {
  for (const auto* list : {&op.inputs, &op.outputs, &op.state})
    for (int t : *list)
      if (t >= 0) fn(t);
  if (op.workspace >= 0) fn(op.workspace);
}

}  // namespace popkit::planner
