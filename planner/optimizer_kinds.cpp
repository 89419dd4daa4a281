// The optimizer kinds' state and cost (planner/optimizer_kinds.h).
#include "planner/optimizer_kinds.h"

#include <array>

namespace popkit::planner {

namespace {

// The optimizer step's state operands per kind: the weight, then the optimizer's state
// (each "<param>.<suffix>" as a variable).
constexpr std::array<std::string_view, 3> kAdam{"weight", "adam_m", "adam_v"};
constexpr std::array<std::string_view, 2> kMomentum{"weight", "momentum"};
constexpr std::array<std::string_view, 1> kPlain{"weight"};

}  // namespace

std::span<const std::string_view> optimizer_step_state(const config::Optimizer& o) {
  switch (o.type) {
    case config::OptimizerType::kAdam:
      return kAdam;
    case config::OptimizerType::kSgd:
      // torch.optim.SGD keeps no buffer without momentum.
      if (o.momentum != 0.0) return kMomentum;
      return kPlain;
  }
  return kPlain;
}

std::vector<OptimizerState> optimizer_state(const config::Optimizer& o) {
  const std::span<const std::string_view> names = optimizer_step_state(o);
  std::vector<OptimizerState> out;
  for (std::size_t i = 1; i < names.size(); ++i) {
    // Adam's first moment may be float16; everything else is float32.
    const bool first_moment = o.type == config::OptimizerType::kAdam && i == 1;
    out.push_back({names[i], first_moment ? o.first_order_dtype : config::DType::kFloat32});
  }
  return out;
}

std::uint64_t optimizer_flops_per_element(const config::Optimizer& o) {
  switch (o.type) {
    case config::OptimizerType::kAdam:
      // Two moments, bias correction, sqrt, divide, decay, update.
      return 12;
    case config::OptimizerType::kSgd:
      // Decay, momentum, Nesterov's look-ahead, update.
      return 2 + (o.momentum != 0.0 ? 2 : 0) + (o.nesterov ? 2 : 0) + 2;
  }
  return 0;
}

}  // namespace popkit::planner
