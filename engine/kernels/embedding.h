// The embedding kind's kernels (engine/tensor/embedding.h), one table per x86-64 level
// (embedding_level.cpp), on float32 token ids as the plan streams them. The engine's
// embedding entry (engine/layer_kinds.cpp) calls them.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace popkit::engine {

struct EmbeddingKernels {
  // Columns [c0, c1) of out [B T, C] = wte[token] + wpe[position], and of the tables'
  // scatter-add of dout (added to what the accumulators hold).
  void (*forward_columns)(const float* tokens, const float* wte, const float* wpe, float* out,
                          std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V,
                          std::int64_t c0, std::int64_t c1);
  void (*backward_columns)(const float* tokens, const float* dout, float* dwte, float* dwpe,
                           std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V,
                           std::int64_t c0, std::int64_t c1);
};

POPKIT_KERNEL_LEVELS(EmbeddingKernels, embedding);

}  // namespace popkit::engine
