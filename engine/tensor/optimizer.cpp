// The optimizer kinds' steps (optimizer.h): adam and sgd.
#include "engine/tensor/optimizer.h"

#include <array>

#include "config/kind_keys.h"
#include "engine/kernels/adam.h"
#include "engine/kernels/sgd.h"
#include "engine/tensor/adam.h"
#include "engine/tensor/sgd.h"

namespace popkit::engine {

struct OptimizerKernel::Kind {
  std::string_view type;  // the kind's name (config/optimizer_kinds.h)
  // The kind's parameters are made from the settings at each step: a few casts.
  void (*step)(const config::Optimizer& o, const Kernels& level, float* w, const float* g,
               std::span<std::byte* const> state, std::span<const config::DType> dtypes,
               std::int64_t n, std::int64_t t);
};

namespace {

// Adam's state: the first moment (float32, or float16 with first_order_dtype), the
// second moment.
void step_adam(const config::Optimizer& o, const Kernels& level, float* w, const float* g,
               std::span<std::byte* const> state, std::span<const config::DType> dtypes,
               std::int64_t n, std::int64_t t) {
  const AdamParams p = AdamParams::from(o);
  auto* v = reinterpret_cast<float*>(state[1]);
  if (dtypes[0] == config::DType::kFloat16)
    kernels_at<AdamKernels>(level).step_half_m(w, g, state[0], v, n, t, p);
  else
    kernels_at<AdamKernels>(level).step(w, g, reinterpret_cast<float*>(state[0]), v, n, t, p);
}

// SGD's state: the momentum buffer, none without momentum.
void step_sgd(const config::Optimizer& o, const Kernels& level, float* w, const float* g,
              std::span<std::byte* const> state, std::span<const config::DType>, std::int64_t n,
              std::int64_t) {
  kernels_at<SgdKernels>(level).step(
      w, g, state.empty() ? nullptr : reinterpret_cast<float*>(state[0]), n, SgdParams::from(o));
}

const std::array<OptimizerKernel::Kind, 2> kKinds{{
    {"adam", step_adam},
    {"sgd", step_sgd},
}};

}  // namespace

OptimizerKernel::OptimizerKernel(const config::Optimizer& o)
    : optimizer_(o), kind_(&config::kind_entry(std::span<const Kind>(kKinds), o.type)) {}

void OptimizerKernel::step(const Kernels& level, float* w, const float* g,
                           std::span<std::byte* const> state, std::span<const config::DType> dtypes,
                           std::int64_t n, std::int64_t t) const {
  kind_->step(optimizer_, level, w, g, state, dtypes, n, t);
}

}  // namespace popkit::engine
