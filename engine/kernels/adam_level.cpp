// One level's adam kernels (adam.h), compiled once per level by popkit_kernel_table.
#include "engine/kernels/adam.h"
#include "engine/tensor/adam_step.h"

namespace popkit::engine {
namespace {

void step_float(float* w, const float* g, float* m, float* v, std::int64_t n, std::int64_t t,
                const AdamParams& p) {
  adam_step(w, g, m, v, n, t, p);
}
void step_half_m(float* w, const float* g, void* m, float* v, std::int64_t n, std::int64_t t,
                 const AdamParams& p) {
  adam_step(w, g, static_cast<Eigen::half*>(m), v, n, t, p);
}

}  // namespace

extern "C" const AdamKernels POPKIT_KERNEL_SYMBOL = {
    .step = &step_float,
    .step_half_m = &step_half_m,
};

}  // namespace popkit::engine
