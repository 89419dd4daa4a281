// The adam optimizer kind's kernels (engine/tensor/adam_step.h), one table per x86-64
// level (adam_level.cpp). The engine's adam entry (engine/tensor/optimizer.cpp) calls them.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace popkit::engine {

struct AdamParams;

struct AdamKernels {
  // One step on n elements, t counting from 1; the first moment m as float32, or as
  // float16 (m_half, Eigen::half).
  void (*step)(float* w, const float* g, float* m, float* v, std::int64_t n, std::int64_t t,
               const AdamParams& p);
  void (*step_half_m)(float* w, const float* g, void* m_half, float* v, std::int64_t n,
                      std::int64_t t, const AdamParams& p);
};

POPKIT_KERNEL_LEVELS(AdamKernels, adam);

}  // namespace popkit::engine
