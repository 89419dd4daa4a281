// The lm_head kind's kernels (engine/tensor/lm_head.h), one table per x86-64 level
// (lm_head_level.cpp). The engine's lm_head entry (engine/layer_kinds.cpp) calls them.
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"

namespace popkit::engine {

struct LmHeadKernels {
  // Columns [j0, j1) of the logits; columns [i0, i1) of dx; rows [j0, j1) of the
  // weight's gradient accumulator (keep and s as lm_head_grad_rows takes them).
  void (*forward_columns)(const float* x, const float* w, float* logits, std::int64_t n,
                          std::int64_t C, std::int64_t V, std::int64_t j0, std::int64_t j1,
                          float* workspace, std::uint64_t workspace_bytes);
  void (*dx_columns)(const float* dy, const float* w, float* dx, std::int64_t n, std::int64_t C,
                     std::int64_t V, std::int64_t i0, std::int64_t i1, float* workspace,
                     std::uint64_t workspace_bytes);
  void (*grad_rows)(const float* dy, const float* x, float* gw, std::int64_t n, std::int64_t C,
                    std::int64_t V, std::int64_t keep, std::int64_t s, std::int64_t j0,
                    std::int64_t j1, float* workspace, std::uint64_t workspace_bytes);
};

POPKIT_KERNEL_LEVELS(LmHeadKernels, lm_head);

}  // namespace popkit::engine
