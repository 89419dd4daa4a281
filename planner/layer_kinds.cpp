// The layer kinds' table (layer_kinds.h): linear and dropout.
#include "planner/layer_kinds.h"

#include <array>

#include "base/error.h"
#include "config/kind_keys.h"
#include "config/names.h"

namespace popkit::planner {
namespace {

constexpr std::array<std::string_view, 3> kParamForwardIn{"in", "weight", "bias"};
constexpr std::array<std::string_view, 2> kParamForwardOut{"out", "pre"};
constexpr std::array<std::string_view, 3> kParamBackwardIn{"in", "pre", "weight"};
constexpr std::array<std::string_view, 3> kParamBackwardState{"dy", "grad_weight", "grad_bias"};
constexpr std::array<std::string_view, 1> kIn{"in"};
constexpr std::array<std::string_view, 1> kOut{"out"};
constexpr std::array<std::string_view, 1> kDy{"dy"};
constexpr std::array<std::string_view, 1> kDx{"dx"};

// FLOPs per element of an activation and of its derivative (tanh-GELU: a cubic, a tanh
// and a few products).
std::uint64_t act_flops(Activation a) {
  return a == Activation::kGelu ? 8 : a == Activation::kRelu ? 1 : 0;
}
std::uint64_t act_grad_flops(Activation a) {
  return a == Activation::kGelu ? 12 : a == Activation::kRelu ? 1 : 0;
}
std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

Activation activation(const LayerInfo& l) {
  return l.attributes.choice<Activation>("activation");
}

// linear: y = act(x W + b).
bool linear_keeps_pre(const LayerInfo& l) {
  return activation(l) != Activation::kNone;
}
std::uint64_t linear_forward_flops(const LayerInfo& l, std::uint64_t rows) {
  const std::uint64_t outs = rows * u(l.out_features);
  // x W: 2 rows in out; + b: rows out; activation per element.
  return 2 * rows * u(l.in_features) * u(l.out_features) + outs + outs * act_flops(activation(l));
}
std::uint64_t linear_backward_flops(const LayerInfo& l, std::uint64_t rows, bool dx) {
  const std::uint64_t w = u(l.in_features) * u(l.out_features);
  const std::uint64_t outs = rows * u(l.out_features);
  return 2 * rows * w               // in^T dz
         + (dx ? 2 * rows * w : 0)  // dz W^T
         + outs                     // column sums for the bias
         + outs * act_grad_flops(activation(l)) +
         kRunningMeanFlops * accumulator_elements(l);  // running mean of the accumulators
}

// linear: the forward's x W is [rows, in] x [in, out]; the backward's in^T dz is
// [in, rows] x [rows, out] and dz W^T is [rows, out] x [out, in].
OpGemms linear_forward_gemms(const LayerInfo& l, std::uint64_t rows) {
  OpGemms g;
  g.gemm[0] = {rows, u(l.out_features), u(l.in_features)};
  g.n_gemms = 1;
  return g;
}
OpGemms linear_backward_gemms(const LayerInfo& l, std::uint64_t rows, bool dx) {
  OpGemms g;
  g.gemm[0] = {u(l.in_features), u(l.out_features), rows};
  if (dx) g.gemm[1] = {rows, u(l.in_features), u(l.out_features)};
  g.n_gemms = dx ? 2 : 1;
  return g;
}
OpGemms no_gemms(const LayerInfo&, std::uint64_t) {
  return {};
}
OpGemms no_backward_gemms(const LayerInfo&, std::uint64_t, bool) {
  return {};
}

// dropout: per element, the mask's hash, the compare and the scale.
constexpr std::uint64_t kDropoutFlops = 4;
std::uint64_t dropout_forward_flops(const LayerInfo& l, std::uint64_t rows) {
  return kDropoutFlops * rows * u(l.in_features);
}
std::uint64_t dropout_backward_flops(const LayerInfo& l, std::uint64_t rows, bool) {
  return kDropoutFlops * rows * u(l.in_features);
}

// linear: Eigen's GEMM packs its operands (workspace.h).
OpWorkspace linear_forward_ws(const LayerInfo& l, std::int64_t rows) {
  return linear_forward_workspace(rows, l.in_features, l.out_features);
}
OpWorkspace linear_backward_ws(const LayerInfo& l, std::int64_t rows, bool dx) {
  return linear_backward_workspace(rows, l.in_features, l.out_features, dx);
}
// dropout: elementwise, no scratch.
OpWorkspace no_workspace(const LayerInfo&, std::int64_t) {
  return {};
}
OpWorkspace no_backward_workspace(const LayerInfo&, std::int64_t, bool) {
  return {};
}
bool keeps_nothing(const LayerInfo&) {
  return false;
}

const LayerKind kLinear{"linear",
                        /*has_params=*/true,
                        /*identity_in_eval=*/false,
                        linear_keeps_pre,
                        kParamForwardIn,
                        kParamForwardOut,
                        kParamBackwardIn,
                        kDx,
                        kParamBackwardState,
                        linear_forward_flops,
                        linear_backward_flops,
                        linear_forward_gemms,
                        linear_backward_gemms,
                        linear_forward_ws,
                        linear_backward_ws};

// Inverted dropout: scaled by 1 / (1 - rate) in training, the identity in evaluation.
// The mask is drawn again in backward from the same key, never stored.
const LayerKind kDropout{"dropout",
                         /*has_params=*/false,
                         /*identity_in_eval=*/true,
                         keeps_nothing,
                         kIn,
                         kOut,
                         kDy,
                         kDx,
                         {},
                         dropout_forward_flops,
                         dropout_backward_flops,
                         no_gemms,
                         no_backward_gemms,
                         no_workspace,
                         no_backward_workspace};

}  // namespace

std::uint64_t accumulator_elements(const LayerInfo& layer) {
  if (!layer_kind(layer.kind).has_params) return 0;
  return u(layer.in_features) * u(layer.out_features) + u(layer.out_features);
}

const LayerKind& layer_kind(std::string_view type) {
  static const std::array<LayerKind, 2> kKinds{kLinear, kDropout};
  return config::kind_entry(std::span<const LayerKind>(kKinds), type);
}

}  // namespace popkit::planner
