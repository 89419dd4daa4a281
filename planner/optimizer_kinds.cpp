// The optimizer kinds' state and cost (planner/optimizer_kinds.h): adam and sgd.
#include "planner/optimizer_kinds.h"

#include <array>

#include "base/error.h"
#include "config/kind_keys.h"
#include "config/names.h"

namespace popkit::planner {
namespace {

using R = OperandRole;

// Adam: the first moment (stored as first_order_dtype) and the second moment.
constexpr std::array<Operand, 3> kAdamStepState{
    {{"weight", R::kParam}, {"adam_m", R::kState, 0}, {"adam_v", R::kState, 1}}};

std::span<const Operand> adam_step_state(const config::Optimizer&) {
  return kAdamStepState;
}
std::vector<OptimizerState> adam_state(const config::Optimizer& o) {
  return {{"adam_m", o.attributes.choice<config::DType>("first_order_dtype"), {}},
          {"adam_v", config::DType::kFloat32, "a second moment is >= 0"}};
}
std::uint64_t adam_flops(const config::Optimizer&) {
  // Two moments, bias correction, sqrt, divide, decay, update.
  return 12;
}

// SGD: a momentum buffer, which torch.optim.SGD keeps only with a momentum.
constexpr std::array<Operand, 2> kMomentumStepState{
    {{"weight", R::kParam}, {"momentum", R::kState, 0}}};
constexpr std::array<Operand, 1> kPlainStepState{{{"weight", R::kParam}}};

bool has_momentum(const config::Optimizer& o) {
  return o.attributes.number("momentum") != 0.0;
}
std::span<const Operand> sgd_step_state(const config::Optimizer& o) {
  if (has_momentum(o)) return kMomentumStepState;
  return kPlainStepState;
}
std::vector<OptimizerState> sgd_state(const config::Optimizer& o) {
  if (has_momentum(o)) return {{"momentum", config::DType::kFloat32, {}}};
  return {};
}
std::uint64_t sgd_flops(const config::Optimizer& o) {
  // Decay, momentum, Nesterov's look-ahead, update.
  return 2 + (has_momentum(o) ? 2 : 0) + (o.attributes.boolean("nesterov") ? 2 : 0) + 2;
}

const std::array<OptimizerKind, 2> kOptimizerKinds{{
    {"adam", adam_step_state, adam_state, adam_flops},
    {"sgd", sgd_step_state, sgd_state, sgd_flops},
}};

}  // namespace

const OptimizerKind& optimizer_kind(std::string_view type) {
  return config::kind_entry(std::span<const OptimizerKind>(kOptimizerKinds), type);
}

std::span<const Operand> optimizer_step_state(const config::Optimizer& o) {
  return optimizer_kind(o.type).step_state(o);
}

std::vector<OptimizerState> optimizer_state(const config::Optimizer& o) {
  std::vector<OptimizerState> state = optimizer_kind(o.type).state(o);
  // The step's state operands are the weight and these, each once by its index.
  const std::span<const Operand> operands = optimizer_step_state(o);
  POPKIT_ASSERT(state.size() + 1 == operands.size());
  for (const Operand& operand : operands)
    POPKIT_ASSERT(operand.role == R::kParam
                      ? operand.index == 0
                      : operand.role == R::kState && operand.index >= 0 &&
                            static_cast<std::size_t>(operand.index) < state.size() &&
                            state[static_cast<std::size_t>(operand.index)].suffix == operand.name);
  return state;
}

int optimizer_operand(const Op& op, const config::Optimizer& o, OperandRole role, int index) {
  if (role == R::kGrad) return index == 0 && !op.inputs.empty() ? op.inputs[0] : -1;
  const std::span<const Operand> operands = optimizer_step_state(o);
  for (std::size_t i = 0; i < operands.size() && i < op.state.size(); ++i)
    if (operands[i].role == role && operands[i].index == index) return op.state[i];
  return -1;
}

std::uint64_t optimizer_flops_per_element(const config::Optimizer& o) {
  return optimizer_kind(o.type).flops_per_element(o);
}

}  // namespace popkit::planner
