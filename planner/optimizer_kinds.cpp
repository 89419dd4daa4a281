// The optimizer kinds' state and cost (planner/optimizer_kinds.h).
#include "planner/optimizer_kinds.h"

namespace popkit::planner {

std::vector<OptimizerState> optimizer_state(const config::Optimizer& o) {
  switch (o.type) {
    case config::OptimizerType::kAdam:
      return {{"adam_m", o.first_order_dtype}, {"adam_v", config::DType::kFloat32}};
    case config::OptimizerType::kSgd:
      if (o.momentum != 0.0) return {{"momentum", config::DType::kFloat32}};
      return {};
  }
  return {};
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
