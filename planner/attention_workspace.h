// Causal multi-head self-attention as planned memory: what the kernels of
// engine/tensor/attention.h keep for the backward pass and the scratch they need. The
// kernels size themselves with these same functions (as the linear's do with
// workspace.h), so a plan's bytes are an exact bound of what they touch.
//
// Shape letters, as llm.c's: B batch, T sequence, C channels, NH heads, HS = C / NH.
#pragma once

#include <algorithm>
#include <cstdint>

#include "planner/workspace.h"

namespace popkit::planner {

struct AttentionShape {
  std::int64_t batch = 0;     // B
  std::int64_t seq = 0;       // T
  std::int64_t channels = 0;  // C
  std::int64_t heads = 0;     // NH, dividing C

  [[nodiscard]] std::int64_t head_size() const { return channels / heads; }  // HS
  // The kernels run on (batch, head) pairs p = b NH + h, each independent of the others.
  [[nodiscard]] std::int64_t pairs() const { return batch * heads; }
};

// A pair's score rows are computed kAttentionRows at a time: causality lets rows
// [r0, r1) stop at column r1, and the backward's scratch is one such block of rows.
inline constexpr std::int64_t kAttentionRows = 64;

// The backward needs the softmax probabilities P [B, NH, T, T] (row t zero past column
// t) and nothing else beside qkv and the output's gradient: B NH T T floats.
[[nodiscard]] inline std::uint64_t attention_saved_bytes(const AttentionShape& s) {
  return static_cast<std::uint64_t>(s.pairs() * s.seq * s.seq) * sizeof(float);
}

// One call's scratch on any range of pairs: a block of kAttentionRows x T floats (the
// backward's dP and dS; the forward's dropped probabilities when attention has dropout),
// then the packing of the largest GEMM over the row blocks, each from a 64-byte line.
//  forward, row block [r0, r1):  S = Q[r0:r1] K[0:r1]^T,  O[r0:r1] = P[r0:r1, 0:r1] V[0:r1]
//  backward:  dV[0:r1] += P[r0:r1, 0:r1]^T dO[r0:r1],  dP = dO[r0:r1] V[0:r1]^T,
//             dQ[r0:r1] = dS K[0:r1],  dK[0:r1] += dS^T Q[r0:r1]
// (gemm_workspace_bytes takes C's columns, the inner size and C's rows.)
[[nodiscard]] inline std::uint64_t attention_block_bytes(const AttentionShape& s) {
  const auto bytes =
      static_cast<std::uint64_t>(std::min(kAttentionRows, s.seq) * s.seq) * sizeof(float);
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

[[nodiscard]] inline std::uint64_t attention_forward_call_workspace(const AttentionShape& s,
                                                                    bool dropout) {
  const std::int64_t hs = s.head_size();
  std::uint64_t gemm = 0;
  for (std::int64_t r0 = 0; r0 < s.seq; r0 += kAttentionRows) {
    const std::int64_t r1 = std::min(s.seq, r0 + kAttentionRows);
    gemm = std::max(
        {gemm, gemm_workspace_bytes(r1, hs, r1 - r0), gemm_workspace_bytes(hs, r1, r1 - r0)});
  }
  return (dropout ? attention_block_bytes(s) : 0) + gemm;
}

[[nodiscard]] inline std::uint64_t attention_backward_call_workspace(const AttentionShape& s) {
  const std::int64_t hs = s.head_size();
  std::uint64_t gemm = 0;
  for (std::int64_t r0 = 0; r0 < s.seq; r0 += kAttentionRows) {
    const std::int64_t r1 = std::min(s.seq, r0 + kAttentionRows);
    gemm = std::max({gemm, gemm_workspace_bytes(hs, r1 - r0, r1),
                     gemm_workspace_bytes(r1, hs, r1 - r0), gemm_workspace_bytes(hs, r1, r1 - r0)});
  }
  return attention_block_bytes(s) + gemm;
}

}  // namespace popkit::planner
