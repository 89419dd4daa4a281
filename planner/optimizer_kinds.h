// The planner's optimizer kinds, each defined in one place (optimizer_kinds.cpp): the
// state it keeps per parameter and what a step costs. Each state tensor is a Variable
// like the parameter itself: sharded under RTS, remote with remote.optimizer_state,
// saved in checkpoints as "<param>.<suffix>", starting at zero. The step itself is the engine's
// (engine/tensor/optimizer.h); the keys and rules are config/'s (config/optimizer_kinds.h),
// and plan files write and read the keys from there.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "planner/layer_kinds.h"

namespace popkit::planner {

struct OptimizerState {
  std::string_view suffix;  // "adam_m", "adam_v", "momentum"
  config::DType dtype = config::DType::kFloat32;
  // Why its values are >= 0 ("a second moment is >= 0"), so a checkpoint holding a
  // negative one is refused; empty when they may take any sign.
  std::string_view non_negative;
};

struct OptimizerKind {
  std::string_view type;  // the kind's name (config/optimizer_kinds.h)
  // The optimizer step's state operands (planner/operands.h): the weight (kParam) and
  // each of `state` (kState, its index there), in the order the step's op holds them.
  std::span<const Operand> (*step_state)(const config::Optimizer& optimizer);
  std::vector<OptimizerState> (*state)(const config::Optimizer& optimizer);
  // FLOPs of one step per element of the parameter.
  std::uint64_t (*flops_per_element)(const config::Optimizer& optimizer);
};

const OptimizerKind& optimizer_kind(std::string_view type);

// The state per parameter, in the order of the optimizer step's state operands after
// the weight. Adam: the first moment (first_order_dtype) and the second (float32).
// SGD: a momentum buffer when momentum != 0 (torch.optim.SGD keeps none without).
std::vector<OptimizerState> optimizer_state(const config::Optimizer& optimizer);

// The optimizer step's state operands: the weight and each of optimizer_state().
std::span<const Operand> optimizer_step_state(const config::Optimizer& optimizer);

// The tensor in the position of `role` of an optimizer step op, from the kind's operands:
// kGrad the weight's reduced gradient (its input), kParam the weight, kState state
// `index` (optimizer_state()'s order); -1 when the op has no such position.
int optimizer_operand(const Op& op, const config::Optimizer& optimizer, OperandRole role,
                      int index = 0);

// FLOPs of one step per element of the parameter.
std::uint64_t optimizer_flops_per_element(const config::Optimizer& optimizer);

}  // namespace popkit::planner
