// The engine's layer kinds (layer_kinds.h): linear, dropout, layer_norm, embedding and
// lm_head here, the decoder block in decoder_block.cpp. Operands are found by role
// (planner/layer_kinds.h); what each op computes is planner/plan.h's contract.
#include "engine/layer_kinds.h"

#include <algorithm>
#include <array>

#include "base/error.h"
#include "config/kind_keys.h"
#include "config/names.h"
#include "engine/decoder_block.h"
#include "engine/kernels/embedding.h"
#include "engine/kernels/linear.h"
#include "engine/kernels/lm_head.h"
#include "engine/layer_calls.h"
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

// The linear kind's operands (planner/layer_kinds.cpp): parameters weight and bias,
// saved tensor pre.
constexpr int kWeight = 0, kBias = 1, kPre = 0;

int operand(const Op& op, R role, int index = 0) {
  return planner::layer_operand(op, planner::layer_kind("linear"), role, index);
}

void linear_forward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int in = operand(op, R::kIn), pre_t = operand(op, R::kSaved, kPre);
  float* out = run.f32(operand(op, R::kOut));
  float* pre = pre_t >= 0 ? run.f32(pre_t) : out;  // none kept: the activation in place
  linear_forward_call(
      run, {run.workspace(), run.workspace_bytes()},
      {run.f32(operand(op, R::kParam, kWeight)), run.rows(in), l.in_features, l.out_features},
      activation(l), run.f32(in), run.f32(operand(op, R::kParam, kBias)), pre, out);
}

void linear_backward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int dy = operand(op, R::kDy), dx_t = operand(op, R::kDx);
  const std::int64_t n = run.rows(dy);
  float* dz = run.f32(dy);  // dz = dy act'(pre), in place in dy
  if (const Activation act = activation(l); act != Activation::kNone)
    activation_backward_call(run, act, run.f32(operand(op, R::kSaved, kPre)), dz,
                             n * l.out_features);
  linear_backward_call(run, {run.workspace(), run.workspace_bytes()},
                       {dx_t >= 0 ? run.f32(operand(op, R::kParam, kWeight)) : nullptr, n,
                        l.in_features, l.out_features},
                       dz, run.f32(operand(op, R::kIn)), dx_t >= 0 ? run.f32(dx_t) : nullptr,
                       run.f32(operand(op, R::kGrad, kWeight)),
                       run.f32(operand(op, R::kGrad, kBias)), run.repeat_step);
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

// Mean and rstd are -1 in evaluation. A sequence's positions are rows of their own.
void layer_norm_forward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int in = ln_operand(op, R::kIn), mean_t = ln_operand(op, R::kSaved, kMean);
  const int rstd_t = ln_operand(op, R::kSaved, kRstd);
  layer_norm_forward_call(
      run,
      {run.f32(in), run.f32(ln_operand(op, R::kParam, kScale)),
       mean_t >= 0 ? run.f32(mean_t) : nullptr, rstd_t >= 0 ? run.f32(rstd_t) : nullptr,
       run.rows(in) * l.sequence, l.in_features / l.sequence},
      run.f32(ln_operand(op, R::kParam, kShift)), run.f32(ln_operand(op, R::kOut)),
      l.attributes.number("eps"));
}

void layer_norm_backward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int dy_t = ln_operand(op, R::kDy), dx_t = ln_operand(op, R::kDx);
  layer_norm_backward_call(
      run,
      {run.f32(ln_operand(op, R::kIn)),
       dx_t >= 0 ? run.f32(ln_operand(op, R::kParam, kScale)) : nullptr,
       run.f32(ln_operand(op, R::kSaved, kMean)), run.f32(ln_operand(op, R::kSaved, kRstd)),
       run.rows(dy_t) * l.sequence, l.in_features / l.sequence},
      run.f32(dy_t), dx_t >= 0 ? run.f32(dx_t) : nullptr, run.f32(ln_operand(op, R::kGrad, kScale)),
      run.f32(ln_operand(op, R::kGrad, kShift)), run.repeat_step);
}

// ---- embedding: out[b, t] = wte[token[b, t]] + wpe[t] --------------------------------

// A parameter's accumulator before a backward adds the micro-batch's raw gradient g and
// divides by s + 1 (the kernels do both): the running mean keeps s of it (none at s = 0,
// where the accumulator may hold anything).
void keep_accumulator(float* acc, std::int64_t n, std::int64_t keep) {
  if (keep == 0) std::fill(acc, acc + n, 0.0f);
  if (keep > 1) std::for_each(acc, acc + n, [&](float& v) { v *= static_cast<float>(keep); });
}

constexpr int kWte = 0, kWpe = 1;

int emb_operand(const Op& op, R role, int index = 0) {
  return planner::layer_operand(op, planner::layer_kind("embedding"), role, index);
}

struct EmbeddingShape {
  std::int64_t B, T, C, V;
};
EmbeddingShape embedding_shape(const LayerInfo& l, std::int64_t rows) {
  return {rows, l.sequence, l.out_features / l.sequence, l.attributes.integer("vocabulary")};
}

void embedding_forward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int tokens = emb_operand(op, R::kIn);
  const auto [B, T, C, V] = embedding_shape(l, run.rows(tokens));
  const float* tok = run.f32(tokens);
  const float* wte = run.f32(emb_operand(op, R::kParam, kWte));
  const float* wpe = run.f32(emb_operand(op, R::kParam, kWpe));
  float* out = run.f32(emb_operand(op, R::kOut));
  const EmbeddingKernels& k = kernels_at<EmbeddingKernels>(run.kernels());
  run.in_column_blocks(B * T, C, [&](std::int64_t c0, std::int64_t c1) {
    k.forward_columns(tok, wte, wpe, out, B, T, C, V, c0, c1);
  });
}

// Tokens have no gradient: the backward only scatters dy into the tables' accumulators.
void embedding_backward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int dy = emb_operand(op, R::kDy);
  const auto [B, T, C, V] = embedding_shape(l, run.rows(dy));
  const std::int64_t s = run.repeat_step, P = l.attributes.integer("positions");
  float* gte = run.f32(emb_operand(op, R::kGrad, kWte));
  float* gpe = run.f32(emb_operand(op, R::kGrad, kWpe));
  keep_accumulator(gte, V * C, s);
  keep_accumulator(gpe, P * C, s);
  const float* tok = run.f32(emb_operand(op, R::kIn));
  const float* d = run.f32(dy);
  const EmbeddingKernels& k = kernels_at<EmbeddingKernels>(run.kernels());
  run.in_column_blocks(B * T, C, [&](std::int64_t c0, std::int64_t c1) {
    k.backward_columns(tok, d, gte, gpe, B, T, C, V, c0, c1);
  });
  if (s > 0) {
    divide_in_blocks(run, gte, s + 1, V * C);
    divide_in_blocks(run, gpe, s + 1, P * C);
  }
}

// ---- lm_head: logits[b, t] = x[b, t] W^T, W [V, C] ------------------------------------

int head_operand(const Op& op, R role) {
  return planner::layer_operand(op, planner::layer_kind("lm_head"), role, 0);
}

struct HeadShape {
  std::int64_t n, C, V;  // n = B T rows of positions
};
HeadShape head_shape(const LayerInfo& l, std::int64_t rows) {
  return {rows * l.sequence, l.in_features / l.sequence, l.attributes.integer("vocabulary")};
}

void lm_head_forward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int in = head_operand(op, R::kIn);
  const auto [n, C, V] = head_shape(l, run.rows(in));
  const float* x = run.f32(in);
  const float* w = run.f32(head_operand(op, R::kParam));
  float* logits = run.f32(head_operand(op, R::kOut));
  const LmHeadKernels& k = kernels_at<LmHeadKernels>(run.kernels());
  const Regions ws(run, planner::lm_head_forward_workspace(n, C, V));
  run.in_column_blocks(n * C, V, [&](std::int64_t j0, std::int64_t j1) {
    k.forward_columns(x, w, logits, n, C, V, j0, j1, ws.of(j0), ws.bytes);
  });
}

void lm_head_backward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const int dy_t = head_operand(op, R::kDy), dx_t = head_operand(op, R::kDx);
  const auto [n, C, V] = head_shape(l, run.rows(dy_t));
  const float* dy = run.f32(dy_t);
  const LmHeadKernels& k = kernels_at<LmHeadKernels>(run.kernels());
  const Regions ws(run, planner::lm_head_backward_workspace(n, C, V, dx_t >= 0));
  if (dx_t >= 0) {
    const float* w = run.f32(head_operand(op, R::kParam));
    float* dx = run.f32(dx_t);
    run.in_column_blocks(n * V, C, [&](std::int64_t i0, std::int64_t i1) {
      k.dx_columns(dy, w, dx, n, C, V, i0, i1, ws.of(i0), ws.bytes);
    });
  }
  const float* x = run.f32(head_operand(op, R::kIn));
  float* gw = run.f32(head_operand(op, R::kGrad));
  const std::int64_t s = run.repeat_step;
  run.in_column_blocks(n * C, V, [&](std::int64_t j0, std::int64_t j1) {
    k.grad_rows(dy, x, gw, n, C, V, s, s, j0, j1, ws.of(j0), ws.bytes);
  });
}

const std::array<LayerKernel, 6> kLayerKernels{{
    {"linear", linear_forward, linear_backward},
    {"dropout", dropout_run, dropout_run},
    {"layer_norm", layer_norm_forward, layer_norm_backward},
    {"embedding", embedding_forward, embedding_backward},
    {"decoder_block", decoder_block_forward, decoder_block_backward},
    {"lm_head", lm_head_forward, lm_head_backward},
}};

}  // namespace

const LayerKernel& layer_kernel(std::string_view type) {
  return config::kind_entry(std::span<const LayerKernel>(kLayerKernels), type);
}

}  // namespace popkit::engine
