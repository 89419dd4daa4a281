// GPT-2's language-model head: logits = x W^T with W [V, C] in the token table's layout
// (so a tied head reads the embedding's table as it is), forward and backward, on float.
// Plain inline functions, so that they compile once per x86-64 level as layers.h does.
// Every GEMM is layers.h's gemm on the planner's blocks (planner::lm_head_*_workspace),
// so results depend on the shapes only, never on how many threads run the blocks.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/tensor/layers.h"

namespace popkit::engine {

// Columns [j0, j1) of logits [n, V] = x [n, C] W^T.
template <typename T>
void lm_head_forward_columns(const T* x, const T* w, T* logits, std::int64_t n, std::int64_t C,
                             std::int64_t V, std::int64_t j0, std::int64_t j1, T* workspace,
                             std::uint64_t workspace_bytes) {
  gemm<false, true>(n, j1 - j0, C, x, C, w + j0 * C, C, logits + j0, V, false, workspace,
                    workspace_bytes);
}

// Columns [i0, i1) of dx [n, C] = dy [n, V] W.
template <typename T>
void lm_head_dx_columns(const T* dy, const T* w, T* dx, std::int64_t n, std::int64_t C,
                        std::int64_t V, std::int64_t i0, std::int64_t i1, T* workspace,
                        std::uint64_t workspace_bytes) {
  gemm<false, false>(n, i1 - i0, V, dy, V, w + i0, C, dx + i0, C, false, workspace,
                     workspace_bytes);
}

// Rows [j0, j1) of the weight's accumulator: acc = (keep acc + dy^T x) / (s + 1), dy
// read as it is (the loss's gradient, an input). keep = s gives the running mean of the
// repeat step s (0 at s = 0: acc written whole), keep = s + 1 adds a tied layer's share.
template <typename T>
void lm_head_grad_rows(const T* dy, const T* x, T* gw, std::int64_t n, std::int64_t C,
                       std::int64_t V, std::int64_t keep, std::int64_t s, std::int64_t j0,
                       std::int64_t j1, T* workspace, std::uint64_t workspace_bytes) {
  T* g = gw + j0 * C;
  const std::int64_t m = (j1 - j0) * C;
  if (keep > 1) std::for_each(g, g + m, [&](T& v) { v *= T(keep); });
  gemm<true, false>(j1 - j0, C, n, dy + j0, V, x, C, g, C, keep != 0, workspace, workspace_bytes);
  if (s > 0) std::for_each(g, g + m, [&](T& v) { v /= T(s + 1); });
}

}  // namespace popkit::engine
