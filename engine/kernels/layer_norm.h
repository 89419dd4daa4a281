// The layer_norm kind's kernels (engine/tensor/layer_norm.h), one table per x86-64 level
// (layer_norm_level.cpp). The engine's layer_norm entry (engine/layer_kinds.cpp) calls them.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace popkit::engine {

struct LayerNormKernels {
  // Rows [r0, r1) of the forward (mean and rstd may be null) and of dx; columns [c0, c1)
  // of the scale's and shift's gradients at repeat step s.
  void (*forward_rows)(const float* x, const float* scale, const float* shift, float* out,
                       float* mean, float* rstd, std::int64_t C, double eps, std::int64_t r0,
                       std::int64_t r1);
  void (*dx_rows)(const float* dy, const float* x, const float* scale, const float* mean,
                  const float* rstd, float* dx, std::int64_t C, std::int64_t r0, std::int64_t r1);
  void (*grad_columns)(const float* dy, const float* x, const float* mean, const float* rstd,
                       float* gscale, float* gshift, std::int64_t n, std::int64_t C, std::int64_t s,
                       std::int64_t c0, std::int64_t c1);
};

POPKIT_KERNEL_LEVELS(LayerNormKernels, layer_norm);

}  // namespace popkit::engine
