// The decoder block's forward and backward (decoder_block.h).
#include "engine/decoder_block.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/linear.h"
#include "engine/layer_calls.h"
#include "engine/tensor/dropout.h"
#include "planner/decoder_block_layout.h"
#include "planner/layer_kinds.h"
#include "planner/layer_ops.h"

namespace popkit::engine {
namespace {

namespace db = planner::decoder_block;
using config::Activation;
using planner::LayerInfo;
using planner::Op;
using R = planner::OperandRole;

// The op's operands by role and index (planner/transformer_kinds.cpp's tables).
class Operands {
 public:
  Operands(const Op& op, const OpRun& run) : op_(op), run_(run) {}
  [[nodiscard]] int index(R role, int i = 0) const {
    return planner::layer_operand(op_, planner::layer_kind("decoder_block"), role, i);
  }
  // Null when the op has no such operand.
  [[nodiscard]] float* f32(R role, int i = 0) const {
    const int t = index(role, i);
    return t >= 0 ? run_.f32(t) : nullptr;
  }
  [[nodiscard]] float* param(int i) const { return f32(R::kParam, i); }
  [[nodiscard]] float* saved(int i) const { return f32(R::kSaved, i); }
  [[nodiscard]] float* grad(int i) const { return f32(R::kGrad, i); }

 private:
  const Op& op_;
  const OpRun& run_;
};

// The op's workspace cut as the plan sized it.
template <int N>
class Carved {
 public:
  Carved(const OpRun& run, const db::Scratch<N>& scratch) : base_(run.workspace()), s_(scratch) {
    if (s_.bytes() > run.workspace_bytes())
      throw Error("the op's workspace holds {} bytes but its kernels need {}",
                  run.workspace_bytes(), s_.bytes());
  }
  [[nodiscard]] float* buffer(int i) const {
    return base_ + s_.offset[static_cast<std::size_t>(i)] / sizeof(float);
  }
  [[nodiscard]] Packing gemm() const {
    return {base_ + s_.gemm_offset / sizeof(float), s_.gemm_bytes};
  }

 private:
  float* base_;
  db::Scratch<N> s_;
};

using Site = DropoutSite;

// The masks' keys of the op's samples at one site.
std::vector<std::uint64_t> site_keys(const Op& op, const OpRun& run, std::int64_t rows, Site site) {
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(rows));
  for (std::int64_t b = 0; b < rows; ++b)
    keys[static_cast<std::size_t>(b)] = decoder_block_dropout_key(
        run.seed, run.optimizer_step, run.first_sample + b, op.layer, site);
  return keys;
}

// to = drop(from) with a residual site's masks, a sample's T C values each; a copy when
// rate is 0 (to may be from).
void drop_residual(const Op& op, const OpRun& run, const db::Dims& d, double rate, Site site,
                   const float* from, float* to) {
  const std::int64_t width = d.T * d.C;
  if (rate > 0.0) {
    const std::vector<std::uint64_t> keys = site_keys(op, run, d.rows, site);
    dropout_keyed_rows(from, to, d.rows, width, rate, keys.data());
  } else if (to != from) {
    std::copy(from, from + d.rows * width, to);
  }
}

void add_into(float* sum, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) sum[i] += x[i];
}

// call(p, region, bytes) for every (batch, head) pair p, each with its own region of the
// packing. The pairs are cut as columns of kColumnBlock each (a pair's share of the
// multiply-adds as their rows x inner), so that the pool may run pairs side by side.
template <typename Call>
void over_pairs(const OpRun& run, const Packing& ws, const db::Dims& d, std::uint64_t region,
                const Call& call) {
  const std::int64_t pairs = d.attention().pairs(), cb = planner::kColumnBlock;
  if (static_cast<std::uint64_t>(pairs) * region > ws.bytes)
    throw Error(
        "the op's workspace holds {} bytes for the attention's packing but its "
        "kernels need {}",
        ws.bytes, static_cast<std::uint64_t>(pairs) * region);
  const std::int64_t per_pair = d.T * d.T * (d.C / d.NH);
  run.in_column_blocks(
      std::max<std::int64_t>(1, per_pair / cb), pairs * cb, [&](std::int64_t j0, std::int64_t j1) {
        for (std::int64_t p = j0 / cb; p < j1 / cb; ++p)
          call(p, ws.at + static_cast<std::uint64_t>(p) * region / sizeof(float), region);
      });
}

}  // namespace

std::uint64_t decoder_block_dropout_key(std::uint64_t seed, std::int64_t step, std::int64_t sample,
                                        std::int64_t layer, DropoutSite site) {
  return dropout_site_key(dropout_key(seed, step, sample, layer), static_cast<std::uint64_t>(site));
}

// In training every intermediate is a saved tensor and dropout applies; in evaluation
// (nothing saved) they live in the workspace and nothing is dropped.
void decoder_block_forward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const Operands o(op, run);
  const db::Dims d = db::dims(l, run.rows(o.index(R::kIn)));
  const bool training = o.index(R::kSaved, db::kQkv) >= 0;
  const Carved ws(run, db::forward_scratch(l, d.rows, training));
  const auto keep = [&](db::Saved saved, db::ForwardBuffer buffer) {
    return training ? o.saved(saved) : ws.buffer(buffer);
  };
  const std::int64_t n = d.n(), C = d.C, H = d.H;
  const double eps = l.attributes.number("eps");
  const double residual = training ? l.attributes.number("residual_dropout") : 0.0;
  const float* x = o.f32(R::kIn);
  float* y = o.f32(R::kOut);
  float* a = keep(db::kLn1Out, db::kA);
  float* qkv = keep(db::kQkv, db::kQkvOut);
  float* att = keep(db::kAttnOut, db::kO);
  float* h = keep(db::kH, db::kHSum);
  float* m = keep(db::kLn2Out, db::kM);
  layer_norm_forward_call(run,
                          {x, o.param(db::kLn1Scale), keep(db::kLn1Mean, db::kMean),
                           keep(db::kLn1Rstd, db::kRstd), n, C},
                          o.param(db::kLn1Shift), a, eps);
  linear_forward_call(run, ws.gemm(), {o.param(db::kQkvW), n, C, 3 * C}, Activation::kNone, a,
                      o.param(db::kQkvB), qkv, qkv);

  const double att_rate = training ? l.attributes.number("attention_dropout") : 0.0;
  const std::vector<std::uint64_t> att_keys =
      att_rate > 0.0 ? site_keys(op, run, d.rows, Site::kAttention) : std::vector<std::uint64_t>{};
  const AttentionDropout dropout{att_rate, att_keys.data()};
  const AttentionKernels& ak = kernels_at<AttentionKernels>(run.kernels());
  float* probs = keep(db::kProbs, db::kP);
  const planner::AttentionShape shape = d.attention();
  over_pairs(run, ws.gemm(), d, db::attention_region(d, false, att_rate > 0.0),
             [&](std::int64_t p, float* region, std::uint64_t bytes) {
               ak.forward(qkv, att, probs, shape, p, p + 1, dropout, region, bytes);
             });

  linear_forward_call(run, ws.gemm(), {o.param(db::kProjW), n, C, C}, Activation::kNone, att,
                      o.param(db::kProjB), y, y);
  drop_residual(op, run, d, residual, Site::kAttentionResidual, y, h);
  add_into(h, x, n * C);
  layer_norm_forward_call(run,
                          {h, o.param(db::kLn2Scale), keep(db::kLn2Mean, db::kMean),
                           keep(db::kLn2Rstd, db::kRstd), n, C},
                          o.param(db::kLn2Shift), m, eps);
  float* f = keep(db::kMlpAct, db::kF);
  linear_forward_call(run, ws.gemm(), {o.param(db::kFcW), n, C, H}, Activation::kGelu, m,
                      o.param(db::kFcB), keep(db::kMlpPre, db::kF), f);
  linear_forward_call(run, ws.gemm(), {o.param(db::kFc2W), n, H, C}, Activation::kNone, f,
                      o.param(db::kFc2B), y, y);
  drop_residual(op, run, d, residual, Site::kMlpResidual, y, y);
  add_into(y, h, n * C);
}

// dy's way back: through the MLP's branch (its residual's dropout, fc2, GELU, fc) and ln2
// into dh, dh = that + dy; through the attention's branch (dropout, the projection, the
// attention, qkv) and ln1 into dx = that + dh. Each linear divides its dz for the running
// mean once its dx is out, so every dz is a copy in the workspace.
void decoder_block_backward(const Op& op, const LayerInfo& l, const OpRun& run) {
  const Operands o(op, run);
  const int dy_t = o.index(R::kDy);
  const db::Dims d = db::dims(l, run.rows(dy_t));
  const Carved ws(run, db::backward_scratch(l, d.rows));
  const std::int64_t n = d.n(), C = d.C, H = d.H, s = run.repeat_step;
  const double residual = l.attributes.number("residual_dropout");
  const float* dy = run.f32(dy_t);
  float* dh = ws.buffer(db::kDh);
  float* dm = ws.buffer(db::kDm);
  float* d_att = ws.buffer(db::kDo);
  float* da = ws.buffer(db::kDa);
  float* df = ws.buffer(db::kDf);
  float* dqkv = ws.buffer(db::kDqkv);

  drop_residual(op, run, d, residual, Site::kMlpResidual, dy, d_att);
  linear_backward_call(run, ws.gemm(), {o.param(db::kFc2W), n, H, C}, d_att, o.saved(db::kMlpAct),
                       df, o.grad(db::kFc2W), o.grad(db::kFc2B), s);
  activation_backward_call(run, Activation::kGelu, o.saved(db::kMlpPre), df, n * H);
  linear_backward_call(run, ws.gemm(), {o.param(db::kFcW), n, C, H}, df, o.saved(db::kLn2Out), dm,
                       o.grad(db::kFcW), o.grad(db::kFcB), s);
  layer_norm_backward_call(
      run,
      {o.saved(db::kH), o.param(db::kLn2Scale), o.saved(db::kLn2Mean), o.saved(db::kLn2Rstd), n, C},
      dm, dh, o.grad(db::kLn2Scale), o.grad(db::kLn2Shift), s);
  add_into(dh, dy, n * C);

  drop_residual(op, run, d, residual, Site::kAttentionResidual, dh, dm);
  linear_backward_call(run, ws.gemm(), {o.param(db::kProjW), n, C, C}, dm, o.saved(db::kAttnOut),
                       d_att, o.grad(db::kProjW), o.grad(db::kProjB), s);
  const double att_rate = l.attributes.number("attention_dropout");
  const std::vector<std::uint64_t> att_keys =
      att_rate > 0.0 ? site_keys(op, run, d.rows, Site::kAttention) : std::vector<std::uint64_t>{};
  const AttentionDropout dropout{att_rate, att_keys.data()};
  const AttentionKernels& ak = kernels_at<AttentionKernels>(run.kernels());
  const float* qkv = o.saved(db::kQkv);
  const float* probs = o.saved(db::kProbs);
  const planner::AttentionShape shape = d.attention();
  over_pairs(run, ws.gemm(), d, db::attention_region(d, true, att_rate > 0.0),
             [&](std::int64_t p, float* region, std::uint64_t bytes) {
               ak.backward(d_att, qkv, probs, dqkv, shape, p, p + 1, dropout, region, bytes);
             });
  linear_backward_call(run, ws.gemm(), {o.param(db::kQkvW), n, C, 3 * C}, dqkv,
                       o.saved(db::kLn1Out), da, o.grad(db::kQkvW), o.grad(db::kQkvB), s);
  float* dx = o.f32(R::kDx);
  layer_norm_backward_call(
      run,
      {o.f32(R::kIn), o.param(db::kLn1Scale), o.saved(db::kLn1Mean), o.saved(db::kLn1Rstd), n, C},
      da, dx, o.grad(db::kLn1Scale), o.grad(db::kLn1Shift), s);
  if (dx != nullptr) add_into(dx, dh, n * C);
}

}  // namespace popkit::engine
