// The optimizer kinds' state and cost (planner/optimizer_kinds.h): adam and sgd.
#include "planner/optimizer_kinds.h"

#include <array>

#include "base/error.h"
#include "config/kind_keys.h"

namespace popkit::planner {
namespace {

// Adam: the first moment (stored as first_order_dtype) and the second moment.
constexpr std::array<std::string_view, 3> kAdamStepState{"weight", "adam_m", "adam_v"};

std::span<const std::string_view> adam_step_state(const config::Optimizer&) {
  return kAdamStepState;
}
std::vector<OptimizerState> adam_state(const config::Optimizer& o) {
  return {{"adam_m", o.first_order_dtype, {}},
          {"adam_v", config::DType::kFloat32, "a second moment is >= 0"}};
}
std::uint64_t adam_flops(const config::Optimizer&) {
  // Two moments, bias correction, sqrt, divide, decay, update.
  return 12;
}

// SGD: a momentum buffer, which torch.optim.SGD keeps only with a momentum.
constexpr std::array<std::string_view, 2> kMomentumStepState{"weight", "momentum"};
constexpr std::array<std::string_view, 1> kPlainStepState{"weight"};

std::span<const std::string_view> sgd_step_state(const config::Optimizer& o) {
  if (o.momentum != 0.0) return kMomentumStepState;
  return kPlainStepState;
}
std::vector<OptimizerState> sgd_state(const config::Optimizer& o) {
  if (o.momentum != 0.0) return {{"momentum", config::DType::kFloat32, {}}};
  return {};
}
std::uint64_t sgd_flops(const config::Optimizer& o) {
  // Decay, momentum, Nesterov's look-ahead, update.
  return 2 + (o.momentum != 0.0 ? 2 : 0) + (o.nesterov ? 2 : 0) + 2;
}

const std::array<OptimizerKind, 2> kOptimizerKinds{{
    {config::OptimizerType::kAdam, adam_step_state, adam_state, adam_flops},
    {config::OptimizerType::kSgd, sgd_step_state, sgd_state, sgd_flops},
}};

}  // namespace

const OptimizerKind& optimizer_kind(config::OptimizerType type) {
  return config::kind_entry(kOptimizerKinds, type);
}

std::span<const std::string_view> optimizer_step_state(const config::Optimizer& o) {
  return optimizer_kind(o.type).step_state(o);
}

std::vector<OptimizerState> optimizer_state(const config::Optimizer& o) {
  std::vector<OptimizerState> state = optimizer_kind(o.type).state(o);
  // The step's operands name the same tensors in the same order.
  const std::span<const std::string_view> operands = optimizer_step_state(o);
  POPKIT_ASSERT(state.size() + 1 == operands.size());
  for (std::size_t i = 0; i < state.size(); ++i) POPKIT_ASSERT(state[i].suffix == operands[i + 1]);
  return state;
}

std::uint64_t optimizer_flops_per_element(const config::Optimizer& o) {
  return optimizer_kind(o.type).flops_per_element(o);
}

}  // namespace popkit::planner
