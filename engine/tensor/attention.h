// Causal multi-head self-attention, forward and backward, on float, as GPT-2's decoder
// block runs it between its fused qkv projection and its output projection (both
// linears outside these kernels). Plain inline functions, so that they compile once per
// x86-64 level as engine/kernels/kernels_impl.cpp compiles layers.h.
//
// Shape letters (planner::AttentionShape): B batch, T sequence, C channels, NH heads,
// HS = C / NH head size. qkv [B T, 3 C] holds row b T + t = [q | k | v], head h's
// columns h HS .. h HS + HS - 1 of each; the output [B T, C] has head h's in the same
// columns. Per (batch, head) pair:
//   P = softmax(Q K^T / sqrt(HS)) over columns k <= t, 0 past t   (saved for backward)
//   O = dropout(P) V
// Backward, from dO: dV = dropout(P)^T dO, dP = dropout'(dO V^T),
//   dS = P (dP - rowsum(P dP)) / sqrt(HS), dQ = dS K, dK = dS^T Q.
//
// Results depend on the values and shapes only: every GEMM is layers.h's gemm with the
// planner's fixed blocking, packing into the caller's workspace; row blocks and sums
// have fixed bounds and orders; exp is Eigen's packet exp on every element (never the
// scalar std::exp for a misaligned head). Pairs are independent, so ranges of pairs
// may run on any number of threads.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.h"
#include "engine/tensor/attention_dropout.h"
#include "engine/tensor/dropout.h"
#include "engine/tensor/layers.h"
#include "planner/attention_workspace.h"

namespace popkit::engine {

namespace attention {

using Packet = Eigen::internal::packet_traits<float>::type;
inline constexpr int kP = Eigen::internal::packet_traits<float>::size;

// x[i] = exp(x[i]) for i < n, each element by the packet exp (the tail padded).
inline void exp_in_place(float* x, std::int64_t n) {
  using namespace Eigen::internal;
  std::int64_t i = 0;
  for (; i + kP <= n; i += kP) pstoreu(x + i, pexp(ploadu<Packet>(x + i)));
  if (i < n) {
    float tail[kP] = {};
    std::copy(x + i, x + n, tail);
    pstoreu(tail, pexp(ploadu<Packet>(tail)));
    std::copy(tail, tail + (n - i), x + i);
  }
}

// A sum in a fixed order whatever the level: eight interleaved partial sums, then
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
template <typename Term>
float fixed_sum(std::int64_t n, Term&& term) {
  float s[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) s[l] += term(i + l);
  for (int l = 0; i < n; ++i, ++l) s[l] += term(i);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Row t of P from its scores S[0..t] in place: p = exp(s scale - max) / sum; columns
// t + 1 .. T - 1 set to 0.
inline void causal_softmax_row(float* row, std::int64_t t, std::int64_t T, float scale) {
  const std::int64_t n = t + 1;
  float max = row[0] * scale;
  for (std::int64_t k = 0; k < n; ++k) {
    row[k] *= scale;
    max = std::max(max, row[k]);
  }
  for (std::int64_t k = 0; k < n; ++k) row[k] -= max;
  exp_in_place(row, n);
  const float sum = fixed_sum(n, [&](std::int64_t k) { return row[k]; });
  for (std::int64_t k = 0; k < n; ++k) row[k] /= sum;
  std::fill(row + n, row + T, 0.0f);
}

// Rows [r0, r1) x columns [0, r1) of dropout(P) for pair (b, h), as O = dropout(P) V
// and dV use them (row stride T): without dropout P's own rows, else `block` filled.
inline const float* dropped_rows(const float* probs, float* block, std::int64_t r0, std::int64_t r1,
                                 std::int64_t T, std::int64_t h, const AttentionDropout& dropout,
                                 std::int64_t b) {
  if (dropout.rate == 0.0) return probs + r0 * T;
  const std::uint32_t threshold = dropout_threshold(dropout.rate);
  const auto keep_scale = static_cast<float>(1.0 / (1.0 - dropout.rate));
  const std::uint64_t key = dropout.sample_keys[b];
  for (std::int64_t t = r0; t < r1; ++t) {
    const float* p = probs + t * T;
    float* d = block + (t - r0) * T;
    for (std::int64_t k = 0; k < r1; ++k)
      d[k] = dropout_keeps(key, (h * T + t) * T + k, threshold) ? p[k] * keep_scale : 0.0f;
  }
  return block;
}

// Pair p = b NH + h's q, k and v in qkv [B T, 3 C] (row stride 3 C).
struct PairInputs {
  const float* q;
  const float* k;
  const float* v;
};
inline PairInputs pair_inputs(const float* qkv, const planner::AttentionShape& s, std::int64_t p) {
  const float* q = qkv + p / s.heads * s.seq * 3 * s.channels + p % s.heads * s.head_size();
  return {q, q + s.channels, q + 2 * s.channels};
}
// Its head's columns in a [B T, C] tensor (row stride C).
inline std::int64_t pair_offset(const planner::AttentionShape& s, std::int64_t p) {
  return p / s.heads * s.seq * s.channels + p % s.heads * s.head_size();
}
inline float score_scale(const planner::AttentionShape& s) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_size())));
}

// The workspace of one call: the row block, then the GEMMs' packing.
struct Scratch {
  float* block = nullptr;
  float* gemm = nullptr;
  std::uint64_t gemm_bytes = 0;
};

inline Scratch split_workspace(float* workspace, std::uint64_t workspace_bytes,
                               std::uint64_t block_bytes) {
  POPKIT_ASSERT(workspace_bytes >= block_bytes);
  return {workspace, workspace + block_bytes / sizeof(float), workspace_bytes - block_bytes};
}

}  // namespace attention

// Pairs [p0, p1) of: probs [B, NH, T, T] = P and out [B T, C] = O from qkv [B T, 3 C].
// `workspace` (64-byte aligned) holds planner::attention_forward_call_workspace bytes.
inline void attention_forward(const float* qkv, float* out, float* probs,
                              const planner::AttentionShape& shape, std::int64_t p0,
                              std::int64_t p1, const AttentionDropout& dropout, float* workspace,
                              std::uint64_t workspace_bytes) {
  const std::int64_t T = shape.seq, C = shape.channels, NH = shape.heads, HS = shape.head_size();
  const std::int64_t C3 = 3 * C;
  const bool drop = dropout.rate > 0.0;
  POPKIT_ASSERT(workspace_bytes >= planner::attention_forward_call_workspace(shape, drop));
  const attention::Scratch ws = attention::split_workspace(
      workspace, workspace_bytes, drop ? planner::attention_block_bytes(shape) : 0);
  const float scale = attention::score_scale(shape);
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t b = p / NH, h = p % NH;
    const auto [q, k, v] = attention::pair_inputs(qkv, shape, p);
    float* P = probs + p * T * T;
    float* o = out + attention::pair_offset(shape, p);
    for (std::int64_t r0 = 0; r0 < T; r0 += planner::kAttentionRows) {
      const std::int64_t r1 = std::min(T, r0 + planner::kAttentionRows);
      gemm<false, true>(r1 - r0, r1, HS, q + r0 * C3, C3, k, C3, P + r0 * T, T, false, ws.gemm,
                        ws.gemm_bytes);
      for (std::int64_t t = r0; t < r1; ++t) attention::causal_softmax_row(P + t * T, t, T, scale);
      const float* used = attention::dropped_rows(P, ws.block, r0, r1, T, h, dropout, b);
      gemm<false, false>(r1 - r0, HS, r1, used, T, v, C3, o + r0 * C, C, false, ws.gemm,
                         ws.gemm_bytes);
    }
  }
}

// Pairs [p0, p1) of dqkv [B T, 3 C] from dout [B T, C], qkv and the forward's probs.
// `workspace` (64-byte aligned) holds planner::attention_backward_call_workspace bytes.
inline void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv,
                               const planner::AttentionShape& shape, std::int64_t p0,
                               std::int64_t p1, const AttentionDropout& dropout, float* workspace,
                               std::uint64_t workspace_bytes) {
  const std::int64_t T = shape.seq, C = shape.channels, NH = shape.heads, HS = shape.head_size();
  const std::int64_t C3 = 3 * C;
  const bool drop = dropout.rate > 0.0;
  POPKIT_ASSERT(workspace_bytes >= planner::attention_backward_call_workspace(shape));
  const attention::Scratch ws =
      attention::split_workspace(workspace, workspace_bytes, planner::attention_block_bytes(shape));
  const float scale = attention::score_scale(shape);
  const std::uint32_t threshold = dropout_threshold(dropout.rate);
  const auto keep_scale = static_cast<float>(1.0 / (1.0 - dropout.rate));
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t b = p / NH, h = p % NH;
    const auto [q, k, v] = attention::pair_inputs(qkv, shape, p);
    const float* P = probs + p * T * T;
    const float* dO = dout + attention::pair_offset(shape, p);
    float* dq = dqkv + (q - qkv);  // dq, dk and dv sit in dqkv as q, k and v in qkv
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    // dK and dV gather every row block's share: from zero, in block order.
    for (std::int64_t t = 0; t < T; ++t) {
      std::fill(dk + t * C3, dk + t * C3 + HS, 0.0f);
      std::fill(dv + t * C3, dv + t * C3 + HS, 0.0f);
    }
    for (std::int64_t r0 = 0; r0 < T; r0 += planner::kAttentionRows) {
      const std::int64_t r1 = std::min(T, r0 + planner::kAttentionRows);
      const std::int64_t rows = r1 - r0;
      const float* used = attention::dropped_rows(P, ws.block, r0, r1, T, h, dropout, b);
      gemm<true, false>(r1, HS, rows, used, T, dO + r0 * C, C, dv, C3, true, ws.gemm,
                        ws.gemm_bytes);
      float* dS = ws.block;
      gemm<false, true>(rows, r1, HS, dO + r0 * C, C, v, C3, dS, T, false, ws.gemm, ws.gemm_bytes);
      for (std::int64_t t = r0; t < r1; ++t) {
        const float* pt = P + t * T;
        float* d = dS + (t - r0) * T;
        const std::int64_t n = t + 1;
        if (drop)
          for (std::int64_t j = 0; j < n; ++j)
            d[j] = dropout_keeps(dropout.sample_keys[b], (h * T + t) * T + j, threshold)
                       ? d[j] * keep_scale
                       : 0.0f;
        const float dot = attention::fixed_sum(n, [&](std::int64_t j) { return pt[j] * d[j]; });
        for (std::int64_t j = 0; j < n; ++j) d[j] = pt[j] * (d[j] - dot) * scale;
        std::fill(d + n, d + r1, 0.0f);
      }
      gemm<false, false>(rows, HS, r1, dS, T, k, C3, dq + r0 * C3, C3, false, ws.gemm,
                         ws.gemm_bytes);
      gemm<true, false>(r1, HS, rows, dS, T, q + r0 * C3, C3, dk, C3, true, ws.gemm, ws.gemm_bytes);
    }
  }
}

}  // namespace popkit::engine
