// The engine's decoder_block entry (engine/decoder_block.cpp) on every level this CPU
// runs, against the block in double (decoder_block_reference.h) at awkward sizes: one
// position, odd widths and head sizes, sequences over one row block of the attention
// (kAttentionRows), pairs in blocks of their own, dropout on the probabilities and the
// residuals. The ops are a real
// plan's (a one-block GPT), each run on buffers of its own with a guarded workspace of
// exactly the bytes the plan gives it, its blocks run last first. Training's forward
// (the saved tensors too) and backward (dx and the twelve gradients' running mean at
// repeat steps 0 and 2), and evaluation's forward, which keeps everything in the
// workspace. The reference's backward is itself checked against finite differences.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <vector>

#include "engine/decoder_block.h"
#include "engine/tensor/dropout.h"
#include "planner/build.h"
#include "planner/element_blocks.h"
#include "planner/layer_kinds.h"
#include "planner/layer_ops.h"
#include "tests/engine/decoder_block_reference.h"
#include "tests/planner/configs.h"
#include "tests/support/kernel_check.h"

using namespace popkit;
using namespace popkit::engine;
using namespace popkit::test;
using planner::OperandRole;

namespace {

struct Case {
  std::int64_t B, T, C, NH, H;
  double attention_dropout = 0, residual_dropout = 0;
};

std::vector<Case> cases() {
  return {{1, 1, 4, 1, 3},
          {2, 7, 12, 3, 20},
          {3, 70, 16, 2, 36},
          {2, 9, 12, 2, 10, 0.25, 0.2},
          {2, 67, 8, 4, 5, 0.1, 0.3},
          // Enough work a pair that the pairs run as blocks of their own.
          {2, 70, 32, 2, 16, 0.1, 0.1}};
}

constexpr double kEps = 1e-5;
constexpr std::uint64_t kSeed = 7;
constexpr std::int64_t kStep = 3, kFirstSample = 5;

config::Config block_config(const Case& c) {
  config::Config cfg = planner::test::gpt({.vocabulary = 13,
                                           .positions = c.T,
                                           .width = c.C,
                                           .blocks = 1,
                                           .heads = c.NH,
                                           .sequence = c.T});
  cfg.model.layers[1] = config::make_layer("h0", "decoder_block",
                                           {{"heads", c.NH},
                                            {"hidden", c.H},
                                            {"attention_dropout", c.attention_dropout},
                                            {"residual_dropout", c.residual_dropout}});
  cfg.training.micro_batch_size = c.B;
  return cfg;
}

// The block's op of a kind in the plan.
const planner::Op& block_op(const planner::Plan& plan, planner::OpKind kind) {
  const planner::Op* found = nullptr;
  const auto visit = [&](const auto& self, const std::vector<planner::Op>& ops) -> void {
    for (const planner::Op& o : ops) {
      if (o.kind == kind && plan.layers[static_cast<std::size_t>(o.layer)].name == "h0") found = &o;
      self(self, o.body);
    }
  };
  for (const planner::Phase& ph : plan.phases) visit(visit, ph.ops);
  BOOST_REQUIRE(found != nullptr);
  return *found;
}

using Buffers = std::map<int, std::vector<float>>;

// One op on float buffers of its own: the real kernels of a level, the workspace guarded.
class BufferRun final : public OpRun {
 public:
  BufferRun(const planner::Plan& plan, Buffers& buffers, const Kernels& level,
            const GuardedWorkspace& ws)
      : plan_(plan), buffers_(buffers), level_(level), ws_(ws) {
    seed = kSeed;
    optimizer_step = kStep;
    first_sample = kFirstSample;
  }
  float* f32(int t) const override {
    const auto it = buffers_.find(t);
    if (it == buffers_.end()) throw std::logic_error("a tensor the test did not give");
    return it->second.data();
  }
  std::int64_t rows(int t) const override {
    return plan_.tensors[static_cast<std::size_t>(t)].shape[0];
  }
  void in_column_blocks(std::int64_t rows_x_inner, std::int64_t n_cols,
                        const std::function<void(std::int64_t, std::int64_t)>& fn) const override {
    const planner::ColumnBlocks cb = planner::column_blocks(rows_x_inner, n_cols);
    for (std::int64_t k = cb.n - 1; k >= 0; --k)
      fn(k * cb.width, std::min(n_cols, (k + 1) * cb.width));
  }
  void in_gemm_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols,
                     const std::function<void(const planner::GemmTile&)>& fn) const override {
    const planner::ColumnBlocks cb = planner::gemm_tiles(rows, inner, n_cols);
    for (std::int64_t b = cb.blocks() - 1; b >= 0; --b) fn(planner::gemm_tile(cb, b, rows, n_cols));
  }
  // Last block first, as above: no result may depend on the blocks' order.
  void in_element_blocks(std::int64_t n,
                         const std::function<void(std::int64_t, std::int64_t)>& fn) const override {
    const planner::ElementBlocks eb = planner::element_blocks(n);
    for (std::int64_t k = eb.n - 1; k >= 0; --k) fn(k * eb.width, std::min(n, (k + 1) * eb.width));
  }
  const Kernels& kernels() const override { return level_; }
  float* workspace() const override { return ws_.data(); }
  std::uint64_t workspace_bytes() const override { return ws_.bytes(); }

 private:
  const planner::Plan& plan_;
  Buffers& buffers_;
  const Kernels& level_;
  const GuardedWorkspace& ws_;
};

int operand(const planner::Op& op, OperandRole role, int i = 0) {
  return planner::layer_operand(op, planner::layer_kind("decoder_block"), role, i);
}

std::int64_t nelms(const planner::Plan& plan, int t) {
  return plan.tensors[static_cast<std::size_t>(t)].nelms;
}

Vec to_double(const float* x, std::int64_t n) {
  return Vec(x, x + n);
}

// Sample b's masks at the plan's layer, as multipliers.
BlockMasks masks(const Case& c, std::int64_t layer, std::int64_t b) {
  const auto draw = [&](DropoutSite site, double rate, std::int64_t n) {
    Vec m(ix(n), 1.0);
    if (rate == 0) return m;
    const std::uint64_t key =
        decoder_block_dropout_key(kSeed, kStep, kFirstSample + b, layer, site);
    for (std::int64_t j = 0; j < n; ++j)
      m[ix(j)] = dropout_keeps(key, j, dropout_threshold(rate)) ? 1.0 / (1.0 - rate) : 0.0;
    return m;
  };
  return {draw(DropoutSite::kAttention, c.attention_dropout, c.NH * c.T * c.T),
          draw(DropoutSite::kAttentionResidual, c.residual_dropout, c.T * c.C),
          draw(DropoutSite::kMlpResidual, c.residual_dropout, c.T * c.C)};
}

// Every element within 1e-4 of the largest magnitude the tensor should hold (float's
// rounding through the block's sums is far below; a wrong term is far above).
void expect_near(const float* got, const Vec& want, const char* what) {
  double most = 0;
  for (const double w : want) most = std::max(most, std::abs(w));
  Mismatches m;
  for (std::size_t i = 0; i < want.size(); ++i)
    m.near(got[i], want[i], 1e-4 * most, what, static_cast<std::int64_t>(i), 0);
  expect_none(m);
}

// The inputs of the block: x and parameters (scales near 1, the rest small).
struct Inputs {
  Vec x;
  BlockParams params;
};

Inputs fill_forward(const planner::Plan& plan, const planner::Op& fwd, Buffers& buf,
                    std::uint64_t key) {
  Inputs in;
  const int x = operand(fwd, OperandRole::kIn);
  buf[x] = random_floats(nelms(plan, x), key);
  in.x = to_double(buf[x].data(), nelms(plan, x));
  for (int i = 0; i < 12; ++i) {
    const int t = operand(fwd, OperandRole::kParam, i);
    std::vector<float> v =
        random_floats(nelms(plan, t), key + 1 + static_cast<std::uint64_t>(i), 0.3);
    if (i == kS1 || i == kS2)
      for (float& s : v) s += 1.0f;
    buf[t] = v;
    in.params[static_cast<std::size_t>(i)] = to_double(v.data(), nelms(plan, t));
  }
  const int y = operand(fwd, OperandRole::kOut);
  buf[y].assign(static_cast<std::size_t>(nelms(plan, y)), kUnwritten);
  for (int i = 0; i < 12; ++i)
    if (const int t = operand(fwd, OperandRole::kSaved, i); t >= 0)
      buf[t].assign(static_cast<std::size_t>(nelms(plan, t)), kUnwritten);
  return in;
}

GuardedWorkspace workspace_of(const planner::Plan& plan, const planner::Op& op) {
  BOOST_REQUIRE(op.workspace >= 0);
  return GuardedWorkspace(plan.tensors[static_cast<std::size_t>(op.workspace)].nbytes);
}

// The reference's per-sample slices of a [B, ...] tensor.
Vec slice(const float* all, std::int64_t b, std::int64_t per) {
  return to_double(all + b * per, per);
}

void check_training(const Kernels& level, const Case& c, std::int64_t s) {
  const planner::Plan plan = planner::build_plan(block_config(c));
  const planner::Op& fwd = block_op(plan, planner::OpKind::kForward);
  const planner::Op& bwd = block_op(plan, planner::OpKind::kBackward);
  Buffers buf;
  const Inputs in = fill_forward(plan, fwd, buf, 100 + static_cast<std::uint64_t>(c.T));
  const BlockDims d{c.T, c.C, c.NH, c.H};
  {
    const GuardedWorkspace ws = workspace_of(plan, fwd);
    decoder_block_forward(fwd, plan.layers[static_cast<std::size_t>(fwd.layer)],
                          BufferRun(plan, buf, level, ws));
    BOOST_TEST(ws.guard_intact());
  }
  // The backward reads the forward's tensors.
  BOOST_REQUIRE(operand(bwd, OperandRole::kIn) == operand(fwd, OperandRole::kIn));
  for (int i = 0; i < 12; ++i)
    BOOST_REQUIRE(operand(bwd, OperandRole::kSaved, i) == operand(fwd, OperandRole::kSaved, i));
  const int dy_t = operand(bwd, OperandRole::kDy), dx_t = operand(bwd, OperandRole::kDx);
  BOOST_REQUIRE(dx_t >= 0);
  buf[dy_t] = random_floats(nelms(plan, dy_t), 55);
  buf[dx_t].assign(static_cast<std::size_t>(nelms(plan, dx_t)), kUnwritten);
  BlockParams before;
  for (int i = 0; i < 12; ++i) {
    const int t = operand(bwd, OperandRole::kGrad, i);
    buf[t] = s == 0 ? std::vector<float>(static_cast<std::size_t>(nelms(plan, t)), kUnwritten)
                    : random_floats(nelms(plan, t), 77 + static_cast<std::uint64_t>(i));
    before[static_cast<std::size_t>(i)] = to_double(buf[t].data(), nelms(plan, t));
  }
  {
    const GuardedWorkspace ws = workspace_of(plan, bwd);
    BufferRun run(plan, buf, level, ws);
    run.repeat_step = s;
    decoder_block_backward(bwd, plan.layers[static_cast<std::size_t>(bwd.layer)], run);
    BOOST_TEST(ws.guard_intact());
  }

  BlockParams grads;
  for (int i = 0; i < 12; ++i)
    grads[static_cast<std::size_t>(i)].assign(in.params[static_cast<std::size_t>(i)].size(), 0.0);
  const std::int64_t per = c.T * c.C;
  for (std::int64_t b = 0; b < c.B; ++b) {
    const BlockMasks mk = masks(c, fwd.layer, b);
    const Vec x = slice(buf[operand(fwd, OperandRole::kIn)].data(), b, per);
    const BlockTrace tr = ref_block_forward(d, in.params, mk, x, kEps);
    BOOST_TEST_CONTEXT("sample " << b) {
      expect_near(buf[operand(fwd, OperandRole::kOut)].data() + b * per, tr.y, "y");
      expect_near(buf[operand(fwd, OperandRole::kSaved, 4)].data() + b * c.NH * c.T * c.T, tr.probs,
                  "probs");
      expect_near(buf[operand(fwd, OperandRole::kSaved, 6)].data() + b * per, tr.h, "h");
      expect_near(buf[operand(fwd, OperandRole::kSaved, 11)].data() + b * c.T * c.H, tr.f,
                  "mlp.act");
      const Vec dx =
          ref_block_backward(d, in.params, mk, x, tr, slice(buf[dy_t].data(), b, per), grads);
      expect_near(buf[dx_t].data() + b * per, dx, "dx");
    }
  }
  const auto d1 = static_cast<double>(s + 1);
  for (int i = 0; i < 12; ++i) {
    Vec want = grads[static_cast<std::size_t>(i)];
    for (std::size_t j = 0; j < want.size(); ++j)  // the running mean; NaN before at s = 0
      if (s > 0)
        want[j] = (static_cast<double>(s) * before[static_cast<std::size_t>(i)][j] + want[j]) / d1;
    BOOST_TEST_CONTEXT("gradient " << i)
    expect_near(buf[operand(bwd, OperandRole::kGrad, i)].data(), want, "grad");
  }
}

void check_evaluation(const Kernels& level, const Case& c) {
  const planner::Plan plan = planner::build_plan(block_config(c), planner::Program::kEval);
  const planner::Op& fwd = block_op(plan, planner::OpKind::kForward);
  Buffers buf;
  const Inputs in = fill_forward(plan, fwd, buf, 300);
  const GuardedWorkspace ws = workspace_of(plan, fwd);
  decoder_block_forward(fwd, plan.layers[static_cast<std::size_t>(fwd.layer)],
                        BufferRun(plan, buf, level, ws));
  BOOST_TEST(ws.guard_intact());
  const BlockDims d{c.T, c.C, c.NH, c.H};
  const BlockMasks none{Vec(ix(c.NH * c.T * c.T), 1.0), Vec(ix(c.T * c.C), 1.0),
                        Vec(ix(c.T * c.C), 1.0)};
  const std::int64_t per = c.T * c.C;
  for (std::int64_t b = 0; b < c.B; ++b)
    expect_near(buf[operand(fwd, OperandRole::kOut)].data() + b * per,
                ref_block_forward(d, in.params, none,
                                  Vec(in.x.begin() + b * per, in.x.begin() + (b + 1) * per), kEps)
                    .y,
                "y");
}

// Sum(y dy) of one sample: the loss whose gradient the reference's backward gives.
double ref_loss(const BlockDims& d, const BlockParams& p, const BlockMasks& mk, const Vec& x,
                const Vec& dy) {
  const Vec y = ref_block_forward(d, p, mk, x, kEps).y;
  double l = 0;
  for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
  return l;
}

Vec random_doubles(std::int64_t n, std::uint64_t key, double std, double mean = 0) {
  const std::vector<float> f = random_floats(n, key, std);
  Vec v(f.begin(), f.end());
  for (double& e : v) e += mean;
  return v;
}

// Multipliers of a mask with rate 0.3 (0 or 1 / 0.7).
Vec some_dropped(std::int64_t n, std::uint64_t key) {
  Vec m(ix(n));
  for (std::int64_t j = 0; j < n; ++j)
    m[ix(j)] = dropout_keeps(key, j, dropout_threshold(0.3)) ? 1.0 / 0.7 : 0.0;
  return m;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(decoder_block_kernels)

// Central differences of sum(y dy) in double (step 1e-6) for every parameter and input
// element of a small block with masks that drop.
BOOST_AUTO_TEST_CASE(the_reference_backward_against_finite_differences) {
  const BlockDims d{5, 4, 2, 3};
  const std::array<std::int64_t, 12> sizes{d.C, d.C, d.C * 3 * d.C, 3 * d.C, d.C * d.C, d.C,
                                           d.C, d.C, d.C * d.H,     d.H,     d.H * d.C, d.C};
  BlockParams p, g;
  for (std::size_t i = 0; i < 12; ++i) {
    const bool scale = i == kS1 || i == kS2;
    p[i] = random_doubles(sizes[i], 500 + i, 0.4, scale ? 1.0 : 0.0);
    g[i].assign(p[i].size(), 0.0);
  }
  const BlockMasks mk{some_dropped(d.NH * d.T * d.T, 1), some_dropped(d.T * d.C, 2),
                      some_dropped(d.T * d.C, 3)};
  Vec x = random_doubles(d.T * d.C, 600, 1.0);
  const Vec dy = random_doubles(d.T * d.C, 601, 1.0);
  const Vec dx = ref_block_backward(d, p, mk, x, ref_block_forward(d, p, mk, x, kEps), dy, g);
  constexpr double kH = 1e-6;
  Mismatches m;
  const auto check = [&](Vec& v, const Vec& grad, const char* what) {
    for (std::size_t j = 0; j < v.size(); ++j) {
      const double keep = v[j];
      v[j] = keep + kH;
      const double up = ref_loss(d, p, mk, x, dy);
      v[j] = keep - kH;
      const double down = ref_loss(d, p, mk, x, dy);
      v[j] = keep;
      m.near(grad[j], (up - down) / (2 * kH), 1e-6 * (1 + std::abs(grad[j])), what,
             static_cast<std::int64_t>(j), 0);
    }
  };
  for (std::size_t i = 0; i < 12; ++i) check(p[i], g[i], "parameter gradient");
  check(x, dx, "dx");
  expect_none(m);
}

BOOST_AUTO_TEST_CASE(training_forward_and_backward_against_double_at_every_level) {
  for (const Kernels* k : runnable_levels())
    for (const Case& c : cases())
      for (const std::int64_t s : {0, 2})
        BOOST_TEST_CONTEXT(k->level << ", B " << c.B << ", T " << c.T << ", C " << c.C << ", NH "
                                    << c.NH << ", H " << c.H << ", dropout " << c.attention_dropout
                                    << "/" << c.residual_dropout << ", s " << s) {
          check_training(*k, c, s);
        }
}

BOOST_AUTO_TEST_CASE(evaluation_forward_against_double_at_every_level) {
  for (const Kernels* k : runnable_levels())
    for (const Case& c : cases())
      BOOST_TEST_CONTEXT(k->level << ", B " << c.B << ", T " << c.T << ", C " << c.C) {
        check_evaluation(*k, c);
      }
}

BOOST_AUTO_TEST_SUITE_END()
