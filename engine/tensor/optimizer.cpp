#include "engine/tensor/optimizer.h"

#include "engine/kernels/kernels.h"

namespace popkit::engine {

OptimizerKernel::OptimizerKernel(const config::Optimizer& o)
    : type_(o.type), adam_(AdamParams::from(o)), sgd_(SgdParams::from(o)) {}

bool OptimizerKernel::accepts(std::size_t i, config::DType dtype) const {
  // Adam's first moment may be stored as float16 (first_order_dtype).
  return dtype == config::DType::kFloat32 || (type_ == config::OptimizerType::kAdam && i == 0);
}

void OptimizerKernel::step(const Kernels& k, float* w, const float* g,
                           std::span<std::byte* const> state, std::span<const config::DType> dtypes,
                           std::int64_t n, std::int64_t t) const {
  switch (type_) {
    case config::OptimizerType::kAdam: {
      auto* v = reinterpret_cast<float*>(state[1]);
      if (dtypes[0] == config::DType::kFloat16)
        k.adam_step_half_m(w, g, state[0], v, n, t, adam_);
      else
        k.adam_step(w, g, reinterpret_cast<float*>(state[0]), v, n, t, adam_);
      return;
    }
    case config::OptimizerType::kSgd:
      k.sgd_step(w, g, state.empty() ? nullptr : reinterpret_cast<float*>(state[0]), n, sgd_);
      return;
  }
}

}  // namespace popkit::engine
