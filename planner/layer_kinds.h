// The planner's layer kinds, each defined in one place (layer_kinds.cpp): the names of
// its forward and backward operands, whether it has parameters and keeps its width,
// what evaluation does with it, and its FLOPs. The builder, the operand walk (plan
// files, the memory walk, the engine's checks) and the cost model ask this table, so a
// new kind of the same shape (parameters {weight, bias} or none) adds an entry here and
// touches no generic code.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "planner/plan.h"
#include "planner/workspace.h"

namespace popkit::planner {

// A GEMM [m, k] x [k, n]: what the cost model prices at a shape-dependent rate.
struct Gemm {
  std::uint64_t m = 0, n = 0, k = 0;
  [[nodiscard]] std::uint64_t flops() const { return 2 * m * n * k; }
};
// The GEMMs of one op: none, one (a forward), or two (a backward: the weight's gradient
// and the input's).
struct OpGemms {
  std::array<Gemm, 2> gemm{};
  int n_gemms = 0;
  [[nodiscard]] std::uint64_t flops() const {
    std::uint64_t f = 0;
    for (int i = 0; i < n_gemms; ++i) f += gemm[static_cast<std::size_t>(i)].flops();
    return f;
  }
};

// The running mean of a gradient accumulator (popxl-addons' accumulate_mean: acc =
// s/(s+1) acc + g/(s+1)), per weight: FLOPs a backward counts for it.
inline constexpr std::uint64_t kRunningMeanFlops = 3;

struct LayerKind {
  std::string_view type;  // the kind's name (config/layer_kinds.h)
  // A weight [in, out] and a bias [out], trained by the optimizer. With parameters a
  // forward is {in, weight, bias} -> {out, pre} and a backward {in, pre, weight} -> {dx}
  // with state {dy, grad_weight, grad_bias} (operands.h); without, {in} -> {out} and
  // {dy} -> {dx}.
  bool has_params = false;
  bool identity_in_eval = false;  // evaluation plans emit no op: its output is its input
  // Its training forward keeps a pre-activation [rows, out] for its backward.
  bool (*keeps_pre)(const LayerInfo& layer);
  std::span<const std::string_view> forward_inputs, forward_outputs;
  std::span<const std::string_view> backward_inputs, backward_outputs, backward_state;
  // FLOPs of one forward or backward op on `rows` samples; dx: the backward computes
  // the input's gradient.
  std::uint64_t (*forward_flops)(const LayerInfo& layer, std::uint64_t rows);
  std::uint64_t (*backward_flops)(const LayerInfo& layer, std::uint64_t rows, bool dx);
  // The GEMMs among those FLOPs (the rest is element-wise work).
  OpGemms (*forward_gemms)(const LayerInfo& layer, std::uint64_t rows);
  OpGemms (*backward_gemms)(const LayerInfo& layer, std::uint64_t rows, bool dx);
  // The kernels' scratch of one forward or backward op on `rows` samples
  // (planner/workspace.h); none for a kind whose kernels need none.
  OpWorkspace (*forward_workspace)(const LayerInfo& layer, std::int64_t rows);
  OpWorkspace (*backward_workspace)(const LayerInfo& layer, std::int64_t rows, bool dx);
};

const LayerKind& layer_kind(std::string_view type);

// The elements of a layer's gradient accumulators, one per parameter: its weight and
// bias (in * out + out), or none.
std::uint64_t accumulator_elements(const LayerInfo& layer);

}  // namespace popkit::planner
