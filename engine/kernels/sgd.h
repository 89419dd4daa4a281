// The sgd optimizer kind's kernel (engine/tensor/sgd.h), one table per x86-64 level
// (sgd_level.cpp). The engine's sgd entry (engine/tensor/optimizer.cpp) calls it.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace popkit::engine {

struct SgdParams;

struct SgdKernels {
  // One step on n elements; b (the momentum buffer) is null without momentum.
  void (*step)(float* w, const float* g, float* b, std::int64_t n, const SgdParams& p);
};

POPKIT_KERNEL_LEVELS(SgdKernels, sgd);

}  // namespace popkit::engine
