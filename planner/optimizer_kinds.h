// The optimizer kinds, one entry each: the state it keeps per parameter and what a step
// costs. Each state tensor is a Variable like the parameter itself: sharded under RTS,
// remote with remote.optimizer_state, saved in checkpoints as "<param>.<suffix>". The
// step itself is the engine's (engine/tensor/optimizers.h); the keys are config/'s.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace popkit::planner {

struct OptimizerState {
  std::string_view suffix;  // "adam_m", "adam_v", "momentum"
  config::DType dtype = config::DType::kFloat32;
};

// The state per parameter, in the order of the optimizer step's state operands after
// the weight. Adam: the first moment (first_order_dtype) and the second (float32).
// SGD: a momentum buffer when momentum != 0 (torch.optim.SGD keeps none without).
std::vector<OptimizerState> optimizer_state(const config::Optimizer& optimizer);

// The optimizer step's state operands (planner/operands.h): "weight", then the
// suffixes of optimizer_state().
std::span<const std::string_view> optimizer_step_state(const config::Optimizer& optimizer);

// FLOPs of one step per element of the parameter.
std::uint64_t optimizer_flops_per_element(const config::Optimizer& optimizer);

}  // namespace popkit::planner
