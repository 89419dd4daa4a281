// The lm_head kernels of every level this CPU runs (engine/tensor/lm_head.h, through the
// kind's table, engine/kernels/lm_head.h) against a reference in double at awkward sizes
// (1 to 300 rows, 1 to 130 channels, vocabularies 1 to 700 so that V has several column
// blocks): the logits x W^T, dx = dy W, and the weight's gradient as the running mean at
// repeat steps 0 and 2 and as a tied layer's added share (keep = s + 1). Each call gets a
// guarded workspace of exactly the region the planner gives it
// (planner::lm_head_*_workspace), and the engine's blocks, run last first.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/kernels/lm_head.h"
#include "planner/workspace.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using namespace popkit::test;
namespace planner = popkit::planner;

namespace {

struct Case {
  std::int64_t n, C, V;
};

std::vector<Case> cases() {
  return {{1, 1, 1}, {3, 7, 17}, {9, 33, 257}, {64, 130, 700}, {300, 16, 600}};
}

std::size_t at(std::int64_t i) {
  return static_cast<std::size_t>(i);
}

std::vector<std::pair<std::int64_t, std::int64_t>> blocks(std::int64_t inner, std::int64_t n) {
  const planner::ColumnBlocks cb = planner::column_blocks(inner, n);
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t k = cb.n - 1; k >= 0; --k)
    out.emplace_back(k * cb.width, std::min(n, (k + 1) * cb.width));
  return out;
}

struct Inputs {
  std::vector<float> x, w, dy;
  explicit Inputs(const Case& c)
      : x(random_floats(c.n * c.C, 11 + c.n)),
        w(random_floats(c.V * c.C, 23 + c.V)),
        dy(random_floats(c.n * c.V, 37 + c.C)) {}
};

void check_forward(const LmHeadKernels& k, const Case& c, const Inputs& in) {
  const planner::OpWorkspace need = planner::lm_head_forward_workspace(c.n, c.C, c.V);
  std::vector<float> logits(at(c.n * c.V), kUnwritten);
  for (const auto& [j0, j1] : blocks(c.n * c.C, c.V)) {
    GuardedWorkspace ws(need.region_bytes);
    k.forward_columns(in.x.data(), in.w.data(), logits.data(), c.n, c.C, c.V, j0, j1, ws.data(),
                      ws.bytes());
    BOOST_TEST(ws.guard_intact());
  }
  Mismatches m;
  for (std::int64_t i = 0; i < c.n; ++i)
    for (std::int64_t v = 0; v < c.V; ++v) {
      Sum s;
      for (std::int64_t j = 0; j < c.C; ++j)
        s.add(double{in.x[at(i * c.C + j)]} * in.w[at(v * c.C + j)]);
      m.near(logits[at(i * c.V + v)], s.value, sum_tolerance(c.C, s.magnitude), "logits", i, v);
    }
  expect_none(m);
}

void check_dx(const LmHeadKernels& k, const Case& c, const Inputs& in) {
  const planner::OpWorkspace need = planner::lm_head_backward_workspace(c.n, c.C, c.V, true);
  std::vector<float> dx(at(c.n * c.C), kUnwritten);
  for (const auto& [i0, i1] : blocks(c.n * c.V, c.C)) {
    GuardedWorkspace ws(need.region_bytes);
    k.dx_columns(in.dy.data(), in.w.data(), dx.data(), c.n, c.C, c.V, i0, i1, ws.data(),
                 ws.bytes());
    BOOST_TEST(ws.guard_intact());
  }
  Mismatches m;
  for (std::int64_t i = 0; i < c.n; ++i)
    for (std::int64_t j = 0; j < c.C; ++j) {
      Sum s;
      for (std::int64_t v = 0; v < c.V; ++v)
        s.add(double{in.dy[at(i * c.V + v)]} * in.w[at(v * c.C + j)]);
      m.near(dx[at(i * c.C + j)], s.value, sum_tolerance(c.V, s.magnitude), "dx", i, j);
    }
  expect_none(m);
}

// acc = (keep acc + dy^T x) / (s + 1); NaN before at keep 0 (written whole).
void check_grad(const LmHeadKernels& k, const Case& c, const Inputs& in, std::int64_t s,
                std::int64_t keep) {
  const planner::OpWorkspace need = planner::lm_head_backward_workspace(c.n, c.C, c.V, false);
  const std::vector<float> before = random_floats(c.V * c.C, 99);
  std::vector<float> gw = keep == 0 ? std::vector<float>(at(c.V * c.C), kUnwritten) : before;
  for (const auto& [j0, j1] : blocks(c.n * c.C, c.V)) {
    GuardedWorkspace ws(need.region_bytes);
    k.grad_rows(in.dy.data(), in.x.data(), gw.data(), c.n, c.C, c.V, keep, s, j0, j1, ws.data(),
                ws.bytes());
    BOOST_TEST(ws.guard_intact());
  }
  Mismatches m;
  const auto d = static_cast<double>(s + 1);
  for (std::int64_t v = 0; v < c.V; ++v)
    for (std::int64_t j = 0; j < c.C; ++j) {
      Sum g;
      for (std::int64_t i = 0; i < c.n; ++i)
        g.add(double{in.dy[at(i * c.V + v)]} * in.x[at(i * c.C + j)]);
      const double prev = keep == 0 ? 0.0 : double{before[at(v * c.C + j)]};
      const double want = (static_cast<double>(keep) * prev + g.value) / d;
      const double tol =
          sum_tolerance(c.n + 3, static_cast<double>(keep) * std::abs(prev) + g.magnitude) / d;
      m.near(gw[at(v * c.C + j)], want, tol, "grad_weight", v, j);
    }
  expect_none(m);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lm_head_kernels)

BOOST_AUTO_TEST_CASE(forward_and_dx_against_double_at_every_level) {
  for (const Kernels* k : runnable_levels())
    for (const Case& c : cases())
      BOOST_TEST_CONTEXT(k->level << ", n " << c.n << ", C " << c.C << ", V " << c.V) {
        const Inputs in(c);
        check_forward(kernels_at<LmHeadKernels>(*k), c, in);
        check_dx(kernels_at<LmHeadKernels>(*k), c, in);
      }
}

BOOST_AUTO_TEST_CASE(weight_gradient_mean_and_tied_add_at_every_level) {
  for (const Kernels* k : runnable_levels())
    for (const Case& c : cases())
      for (const auto& [s, keep] : {std::pair{0, 0}, {2, 2}, {0, 1}, {2, 3}})
        BOOST_TEST_CONTEXT(k->level << ", n " << c.n << ", C " << c.C << ", V " << c.V << ", s "
                                    << s << ", keep " << keep) {
          check_grad(kernels_at<LmHeadKernels>(*k), c, Inputs(c), s, keep);
        }
}

BOOST_AUTO_TEST_SUITE_END()
