// The decoder block's layout, shared by its planner entry (transformer_kinds.cpp) and its
// engine entry (engine/decoder_block.cpp): the indices of its parameters and saved
// tensors, its four linears, and its workspace cut into the buffers the engine uses, so
// that the planned bytes are exactly those the kernels touch.
#pragma once

#include <array>
#include <cstdint>

#include "planner/attention_workspace.h"
#include "planner/plan.h"

namespace popkit::planner::decoder_block {

// Parameters, in the order of the kind's parameter table (their names in
// transformer_kinds.cpp): ln1, the attention's qkv and output projections, ln2, the MLP.
enum Param {
  kLn1Scale,
  kLn1Shift,
  kQkvW,
  kQkvB,
  kProjW,
  kProjB,
  kLn2Scale,
  kLn2Shift,
  kFcW,
  kFcB,
  kFc2W,
  kFc2B,
  kParams
};
// Saved tensors (training keeps them for the backward), in the kind's order.
enum Saved {
  kLn1Mean,
  kLn1Rstd,
  kLn1Out,
  kQkv,
  kProbs,
  kAttnOut,
  kH,
  kLn2Mean,
  kLn2Rstd,
  kLn2Out,
  kMlpPre,
  kMlpAct,
  kSaved
};

// The block's sizes on `rows` samples: T positions of C features, NH heads, H hidden.
struct Dims {
  std::int64_t rows, T, C, NH, H;
  [[nodiscard]] std::int64_t n() const { return rows * T; }  // the linears' rows
  [[nodiscard]] AttentionShape attention() const { return {rows, T, C, NH}; }
};
[[nodiscard]] Dims dims(const LayerInfo& l, std::int64_t rows);

// The four linears, [n, in] x [in, out]: qkv, the attention's projection, fc, fc2.
struct Linear {
  std::int64_t in, out;
};
[[nodiscard]] std::array<Linear, 4> linears(const Dims& d);

// The forward's buffers when nothing is saved (evaluation): what training saves, held in
// the workspace while the op runs (mlp.pre and mlp.act one buffer, the activation in
// place).
enum ForwardBuffer { kA, kQkvOut, kP, kO, kHSum, kM, kF, kMean, kRstd, kForwardBuffers };
// The backward's gradients inside the block: of h, of m (then of the first residual
// branch, dropped), of o (first the second residual branch's, dropped), of a, of the MLP's
// pre-activation and of qkv.
enum BackwardBuffer { kDh, kDm, kDo, kDa, kDf, kDqkv, kBackwardBuffers };

// A workspace: its buffers from the start, each from a 64-byte line, then one region for
// the GEMMs' packing (the linears' column-block regions, or the attention's one per
// (batch, head) pair, each round_up(its call's bytes)), used one GEMM after another.
template <int N>
struct Scratch {
  std::array<std::uint64_t, N> offset{};  // bytes from the workspace's start
  std::uint64_t gemm_offset = 0, gemm_bytes = 0;
  [[nodiscard]] std::uint64_t bytes() const { return gemm_offset + gemm_bytes; }
};
// saves: training keeps the intermediates as saved tensors, so the forward needs only
// the packing (no buffers); dx: the backward gives the block's input gradient.
[[nodiscard]] Scratch<kForwardBuffers> forward_scratch(const LayerInfo& l, std::int64_t rows,
                                                       bool saves);
[[nodiscard]] Scratch<kBackwardBuffers> backward_scratch(const LayerInfo& l, std::int64_t rows);

// Each pair's region of the attention's packing: its call's bytes, rounded to a line.
[[nodiscard]] std::uint64_t attention_region(const Dims& d, bool backward, bool dropout);

}  // namespace popkit::planner::decoder_block
