// The planner's layer kinds (layer_kinds.h): linear, dropout and layer_norm here, the
// transformer's in transformer_kinds.cpp.
#include "planner/layer_kinds.h"

#include "config/kind_keys.h"
#include "config/names.h"
#include "planner/layer_ops.h"
#include "planner/transformer_kinds.h"

namespace popkit::planner {
namespace {

using R = OperandRole;

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

OpGemms no_gemms(const LayerInfo&, std::uint64_t) {
  return {};
}
OpGemms no_backward_gemms(const LayerInfo&, std::uint64_t, bool) {
  return {};
}
OpWorkspace no_workspace(const LayerInfo&, std::int64_t, bool) {
  return {};
}
OpWorkspace no_backward_workspace(const LayerInfo&, std::int64_t, bool) {
  return {};
}

// ---- linear: y = act(x W + b), W [in, out], b [out] ---------------------------------

Activation activation(const LayerInfo& l) {
  return l.attributes.choice<Activation>("activation");
}

// FLOPs per element of an activation and of its derivative (tanh-GELU: a cubic, a tanh
// and a few products).
std::uint64_t act_flops(Activation a) {
  return a == Activation::kGelu ? 8 : a == Activation::kRelu ? 1 : 0;
}
std::uint64_t act_grad_flops(Activation a) {
  return a == Activation::kGelu ? 12 : a == Activation::kRelu ? 1 : 0;
}

constexpr std::array<ParamSpec, 2> kLinearParams{{
    {"weight", VariableRole::kWeight, ParamInit::kWeights, DType::kFloat32,
     [](const LayerInfo& l) {
       return Shape{l.in_features, l.out_features};
     }},
    {"bias", VariableRole::kBias, ParamInit::kBiases, DType::kFloat32,
     [](const LayerInfo& l) { return Shape{l.out_features}; }},
}};
constexpr int kWeight = 0, kBias = 1;

// The pre-activation x W + b, which the backward's act'(pre) needs.
constexpr std::array<SavedSpec, 1> kLinearSaved{{
    {"pre", "the pre-activation",
     [](const LayerInfo& l, std::int64_t rows) {
       return Shape{rows, l.out_features};
     },
     [](const LayerInfo& l) { return activation(l) != Activation::kNone; }},
}};
constexpr int kPre = 0;

constexpr std::array<Operand, 3> kLinearForwardIn{
    {{"in", R::kIn}, {"weight", R::kParam, kWeight}, {"bias", R::kParam, kBias}}};
constexpr std::array<Operand, 2> kLinearForwardOut{{{"out", R::kOut}, {"pre", R::kSaved, kPre}}};
// dx = dz W^T needs the weight; dy is overwritten with dz = dy act'(pre), so it is state.
constexpr std::array<Operand, 3> kLinearBackwardIn{
    {{"in", R::kIn}, {"pre", R::kSaved, kPre}, {"weight", R::kParam, kWeight, true}}};
constexpr std::array<Operand, 1> kDxOut{{{"dx", R::kDx}}};
constexpr std::array<Operand, 3> kLinearBackwardState{
    {{"dy", R::kDy}, {"grad_weight", R::kGrad, kWeight}, {"grad_bias", R::kGrad, kBias}}};

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

// The forward's x W is [rows, in] x [in, out]; the backward's in^T dz is [in, rows] x
// [rows, out] and dz W^T is [rows, out] x [out, in].
OpGemms linear_forward_gemms(const LayerInfo& l, std::uint64_t rows) {
  OpGemms g;
  g.gemm[0] = {rows, u(l.out_features), u(l.in_features), true};
  g.n_gemms = 1;
  return g;
}
OpGemms linear_backward_gemms(const LayerInfo& l, std::uint64_t rows, bool dx) {
  OpGemms g;
  g.gemm[0] = {u(l.in_features), u(l.out_features), rows};
  if (dx) g.gemm[1] = {rows, u(l.in_features), u(l.out_features), true};
  g.n_gemms = dx ? 2 : 1;
  return g;
}

// Eigen's GEMM packs its operands (workspace.h).
OpWorkspace linear_forward_ws(const LayerInfo& l, std::int64_t rows, bool) {
  return linear_forward_workspace(rows, l.in_features, l.out_features);
}
OpWorkspace linear_backward_ws(const LayerInfo& l, std::int64_t rows, bool dx) {
  return linear_backward_workspace(rows, l.in_features, l.out_features, dx);
}

// ---- dropout: y = x * mask / (1 - rate) in training, y = x in evaluation ------------

// The mask is drawn again in backward from the same key, never stored.
constexpr std::array<Operand, 1> kInOnly{{{"in", R::kIn}}};
constexpr std::array<Operand, 1> kOutOnly{{{"out", R::kOut}}};
constexpr std::array<Operand, 1> kDyOnly{{{"dy", R::kDy}}};

// Per element, the mask's hash, the compare and the scale.
constexpr std::uint64_t kDropoutFlops = 4;
std::uint64_t dropout_forward_flops(const LayerInfo& l, std::uint64_t rows) {
  return kDropoutFlops * rows * u(l.in_features);
}
std::uint64_t dropout_backward_flops(const LayerInfo& l, std::uint64_t rows, bool) {
  return kDropoutFlops * rows * u(l.in_features);
}

// ---- layer_norm: y = (x - mean) rstd scale + shift, rstd = 1 / sqrt(var + eps) -------

// Each position of a sample normalised over its C = width / sequence features (all of an
// MLP's sample). scale [C] starts at 1 and shift [C] at 0 (torch.nn.LayerNorm's), whatever
// model.init.
Shape per_feature(const LayerInfo& l) {
  return Shape{l.in_features / l.sequence};
}
constexpr std::array<ParamSpec, 2> kLayerNormParams{{
    {"scale", VariableRole::kWeight, ParamInit::kOnes, DType::kFloat32, per_feature},
    {"shift", VariableRole::kBias, ParamInit::kZeros, DType::kFloat32, per_feature},
}};
constexpr int kScale = 0, kShift = 1;

// Each row's (each position's) mean and 1 / sqrt(var + eps): the backward's normalised
// input from x.
Shape per_row(const LayerInfo& l, std::int64_t rows) {
  return Shape{rows * l.sequence};
}
bool always(const LayerInfo&) {
  return true;
}
constexpr std::array<SavedSpec, 2> kLayerNormSaved{{
    {"mean", "the row means", per_row, always},
    {"rstd", "the row reciprocal deviations", per_row, always},
}};
constexpr int kMean = 0, kRstd = 1;

constexpr std::array<Operand, 3> kLayerNormForwardIn{
    {{"in", R::kIn}, {"scale", R::kParam, kScale}, {"shift", R::kParam, kShift}}};
constexpr std::array<Operand, 3> kLayerNormForwardOut{
    {{"out", R::kOut}, {"mean", R::kSaved, kMean}, {"rstd", R::kSaved, kRstd}}};
// The parameters' gradients need dy, x, mean and rstd; dx needs the scale too.
constexpr std::array<Operand, 5> kLayerNormBackwardIn{{{"dy", R::kDy},
                                                       {"in", R::kIn},
                                                       {"mean", R::kSaved, kMean},
                                                       {"rstd", R::kSaved, kRstd},
                                                       {"scale", R::kParam, kScale, true}}};
constexpr std::array<Operand, 2> kLayerNormBackwardState{
    {{"grad_scale", R::kGrad, kScale}, {"grad_shift", R::kGrad, kShift}}};

// Per element: forward the two sums, the centring, the square, the scale and shift;
// backward the normalised value again, the two row sums, dx and the two column sums.
constexpr std::uint64_t kLayerNormFlops = 7, kLayerNormBackwardFlops = 12;
std::uint64_t layer_norm_forward_flops(const LayerInfo& l, std::uint64_t rows) {
  return kLayerNormFlops * rows * u(l.in_features);
}
std::uint64_t layer_norm_backward_flops(const LayerInfo& l, std::uint64_t rows, bool) {
  return kLayerNormBackwardFlops * rows * u(l.in_features) +
         kRunningMeanFlops * accumulator_elements(l);
}

constexpr std::array<LayerKind, 3> kMlpKinds{{
    {"linear", kLinearParams, kLinearSaved, /*identity_in_eval=*/false, kLinearForwardIn,
     kLinearForwardOut, kLinearBackwardIn, kDxOut, kLinearBackwardState, linear_forward_flops,
     linear_backward_flops, linear_forward_gemms, linear_backward_gemms, linear_forward_ws,
     linear_backward_ws},
    {"dropout",
     {},
     {},
     /*identity_in_eval=*/true,
     kInOnly,
     kOutOnly,
     kDyOnly,
     kDxOut,
     {},
     dropout_forward_flops,
     dropout_backward_flops,
     no_gemms,
     no_backward_gemms,
     no_workspace,
     no_backward_workspace},
    {"layer_norm", kLayerNormParams, kLayerNormSaved, /*identity_in_eval=*/false,
     kLayerNormForwardIn, kLayerNormForwardOut, kLayerNormBackwardIn, kDxOut,
     kLayerNormBackwardState, layer_norm_forward_flops, layer_norm_backward_flops, no_gemms,
     no_backward_gemms, no_workspace, no_backward_workspace},
}};

}  // namespace

const LayerKind& layer_kind(std::string_view type) {
  return config::kind_entry(layer_kinds(), type);
}

std::span<const LayerKind> layer_kinds() {
  static const std::array<LayerKind, 6> kinds{kMlpKinds[0],         kMlpKinds[1],
                                              kMlpKinds[2],         embedding_kind(),
                                              decoder_block_kind(), lm_head_kind()};
  return kinds;
}

}  // namespace popkit::planner
