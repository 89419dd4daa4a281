// The engine's layer kinds (layer_kinds.h): linear, dropout and layer_norm. Operands are found by
// role (planner/layer_kinds.h); what each op computes is planner/plan.h's contract.
#include "engine/layer_kinds.h"

#include <array>

#include "base/error.h"
#include "config/kind_keys.h"
#include "config/names.h"
#include "engine/kernels/layer_norm.h"
#include "engine/kernels/linear.h"
#include "engine/tensor/dropout.h"
#include "planner/layer_kinds.h"
#include "planner/layer_ops.h"
#include "planner/workspace.h"

namespace popkit::engine {
namespace {

using config::Activation;
using planner::LayerInfo;
using planner::Op;
using R = planner::OperandRole;

Activation activation(const LayerInfo& l) {
  return l.attributes.choice<Activation>("activation");
}

// ---- linear: y = act(x W + b) ------------------------------------------------------

// The op's workspace cut into its column blocks' regions (planner/workspace.h): the call
// on the block starting at column j packs into region j / kColumnBlock. The plan sized
// the workspace with the same functions; a smaller one is a bug in the plan.
struct Regions {
  Regions(const OpRun& run, const planner::OpWorkspace& need)
      : base(run.workspace()), bytes(need.region_bytes) {
    if (need.bytes() > run.workspace_bytes())
      throw Error("the op's workspace holds {} bytes but its kernels need {}",
                  run.workspace_bytes(), need.bytes());
  }
  [[nodiscard]] float* of(std::int64_t j0) const {
    if (base == nullptr) return nullptr;
    const auto region = static_cast<std::uint64_t>(j0 / planner::kColumnBlock);
    return base + region * bytes / sizeof(float);
  }
  float* base;
  std::uint64_t bytes;
};

// The linear kind's operands (planner/layer_kinds.cpp): parameters weight and bias,
// saved tensor pre.
constexpr int kWeight = 0, kBias = 1, kPre = 0;

int operand(const Op& op, R role, int index = 0) {
  return planner::layer_operand(op, planner::layer_kind("linear"), role, index);
}

void linear_forward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int in = operand(op, R::kIn), pre_t = operand(op, R::kSaved, kPre);
  const std::int64_t n = run.rows(in);
  const float* x = run.f32(in);
  const float* w = run.f32(operand(op, R::kParam, kWeight));
  const float* b = run.f32(operand(op, R::kParam, kBias));
  float* out = run.f32(operand(op, R::kOut));
  float* pre = pre_t >= 0 ? run.f32(pre_t) : out;  // none kept: the activation in place
  const LinearKernels& k = kernels_at<LinearKernels>(run.kernels());
  const Regions ws(run, planner::linear_forward_workspace(n, l.in_features, l.out_features));
  run.in_column_blocks(n * l.in_features, l.out_features, [&](std::int64_t j0, std::int64_t j1) {
    k.forward_columns(activation(l), x, w, b, pre, out, n, l.in_features, l.out_features, j0, j1,
                      ws.of(j0), ws.bytes);
  });
}

void linear_backward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int dy = operand(op, R::kDy), dx_t = operand(op, R::kDx);
  const std::int64_t n = run.rows(dy);
  const std::int64_t in = l.in_features, out = l.out_features;
  const std::int64_t s = run.repeat_step;
  const LinearKernels& k = kernels_at<LinearKernels>(run.kernels());
  float* dz = run.f32(dy);  // dz = dy act'(pre), in place in dy
  const Regions ws(run, planner::linear_backward_workspace(n, in, out, dx_t >= 0));
  if (const Activation act = activation(l); act != Activation::kNone)
    k.activation_backward(act, run.f32(operand(op, R::kSaved, kPre)), dz, n * out);
  if (dx_t >= 0) {
    const float* w = run.f32(operand(op, R::kParam, kWeight));
    float* dx = run.f32(dx_t);
    run.in_column_blocks(n * out, in, [&](std::int64_t i0, std::int64_t i1) {
      k.dx_columns(dz, w, dx, n, in, out, i0, i1, ws.of(i0), ws.bytes);
    });
  }
  // The running mean's g/(s+1) as x^T (dz/(s+1)): dz is no longer needed.
  if (s > 0) run.kernels().divide(dz, static_cast<float>(s + 1), n * out);
  const float* x = run.f32(operand(op, R::kIn));
  float* gw = run.f32(operand(op, R::kGrad, kWeight));
  float* gb = run.f32(operand(op, R::kGrad, kBias));
  run.in_column_blocks(n * in, out, [&](std::int64_t j0, std::int64_t j1) {
    k.grad_columns(dz, x, gw, gb, n, in, out, s, j0, j1, ws.of(j0), ws.bytes);
  });
}

// ---- dropout: y = x * mask / (1 - rate) --------------------------------------------

// The mask of the sample at row i is keyed by (seed, optimizer step, its index in the
// global batch, layer); the backward draws the same mask again.
void dropout_run(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int from = op.inputs[0], to = op.outputs[0];
  dropout_rows(run.f32(from), run.f32(to), run.rows(from), l.in_features,
               l.attributes.number("rate"), run.seed, run.optimizer_step, run.first_sample,
               op.layer);
}

// ---- layer_norm: y = (x - mean) rstd scale + shift, rstd = 1 / sqrt(var + eps) -------

constexpr int kScale = 0, kShift = 1, kMean = 0, kRstd = 1;

int ln_operand(const Op& op, R role, int index = 0) {
  return planner::layer_operand(op, planner::layer_kind("layer_norm"), role, index);
}

// Rows on the pool in blocks the shapes fix; mean and rstd are -1 in evaluation.
void layer_norm_forward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int in = ln_operand(op, R::kIn), mean_t = ln_operand(op, R::kSaved, kMean);
  const int rstd_t = ln_operand(op, R::kSaved, kRstd);
  // A sequence's positions are rows of their own.
  const std::int64_t n = run.rows(in) * l.sequence, C = l.in_features / l.sequence;
  const float* x = run.f32(in);
  const float* scale = run.f32(ln_operand(op, R::kParam, kScale));
  const float* shift = run.f32(ln_operand(op, R::kParam, kShift));
  float* out = run.f32(ln_operand(op, R::kOut));
  float* mean = mean_t >= 0 ? run.f32(mean_t) : nullptr;
  float* rstd = rstd_t >= 0 ? run.f32(rstd_t) : nullptr;
  const double eps = l.attributes.number("eps");
  const LayerNormKernels& k = kernels_at<LayerNormKernels>(run.kernels());
  run.in_column_blocks(C, n, [&](std::int64_t r0, std::int64_t r1) {
    k.forward_rows(x, scale, shift, out, mean, rstd, C, eps, r0, r1);
  });
}

void layer_norm_backward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int dy_t = ln_operand(op, R::kDy), dx_t = ln_operand(op, R::kDx);
  const std::int64_t n = run.rows(dy_t) * l.sequence, C = l.in_features / l.sequence;
  const float* dy = run.f32(dy_t);
  const float* x = run.f32(ln_operand(op, R::kIn));
  const float* mean = run.f32(ln_operand(op, R::kSaved, kMean));
  const float* rstd = run.f32(ln_operand(op, R::kSaved, kRstd));
  const LayerNormKernels& k = kernels_at<LayerNormKernels>(run.kernels());
  if (dx_t >= 0) {
    const float* scale = run.f32(ln_operand(op, R::kParam, kScale));
    float* dx = run.f32(dx_t);
    run.in_column_blocks(C, n, [&](std::int64_t r0, std::int64_t r1) {
      k.dx_rows(dy, x, scale, mean, rstd, dx, C, r0, r1);
    });
  }
  float* gscale = run.f32(ln_operand(op, R::kGrad, kScale));
  float* gshift = run.f32(ln_operand(op, R::kGrad, kShift));
  run.in_column_blocks(n, C, [&](std::int64_t c0, std::int64_t c1) {
    k.grad_columns(dy, x, mean, rstd, gscale, gshift, n, C, run.repeat_step, c0, c1);
  });
}

// The transformer's kinds are planned (planner/transformer_kinds.h) but have no kernels
// yet (null forward and backward): the engine's plan check refuses a plan with one.
const std::array<LayerKernel, 6> kLayerKernels{{
    {"linear", linear_forward, linear_backward},
    {"dropout", dropout_run, dropout_run},
    {"layer_norm", layer_norm_forward, layer_norm_backward},
    {"embedding", nullptr, nullptr},
    {"decoder_block", nullptr, nullptr},
    {"lm_head", nullptr, nullptr},
}};

}  // namespace

const LayerKernel& layer_kernel(std::string_view type) {
  return config::kind_entry(std::span<const LayerKernel>(kLayerKernels), type);
}

}  // namespace popkit::engine
