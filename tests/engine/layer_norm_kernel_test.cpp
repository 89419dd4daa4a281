// The layer_norm kernels of every level this CPU runs (engine/tensor/layer_norm.h, through
// the kind's table, engine/kernels/layer_norm.h) against a reference in double at 1, 7, 17
// and 513 features and 1, 3 and 64 rows: the forward with and without its kept
// statistics, dx, and the scale's and shift's gradients at repeat steps 0 and 2 (the
// running mean); rows and columns split as the engine splits them give the same bits as
// one call, and nothing outside a call's range is written. Tolerances are float rounding
// bounds (tests/support/kernel_check.h): each computed value is a handful of rounded
// float operations on terms the reference sums exactly, so it lies within k u of the
// magnitudes involved, k the operations.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/kernels/layer_norm.h"
#include "planner/workspace.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using namespace popkit::test;

namespace {

constexpr double kEps = 1.0e-5;

struct Case {
  std::int64_t n, C;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const std::int64_t n : {1, 3, 64})
    for (const std::int64_t C : {1, 7, 17, 513}) all.push_back({n, C});
  return all;
}

// A case's inputs: x with a row offset (a mean far from 0 is where a one-pass variance
// loses its digits), scale near 1, shift and dy.
struct Inputs {
  std::vector<float> x, scale, shift, dy;
  Inputs(const Case& c, std::uint64_t key)
      : x(random_floats(c.n * c.C, key)),
        scale(random_floats(c.C, key + 1, 0.5)),
        shift(random_floats(c.C, key + 2)),
        dy(random_floats(c.n * c.C, key + 3)) {
    for (std::int64_t i = 0; i < c.n; ++i)
      for (std::int64_t j = 0; j < c.C; ++j)
        x[static_cast<std::size_t>(i * c.C + j)] += 3.0f * static_cast<float>(i);
    for (float& s : scale) s += 1.0f;
  }
};

// The reference's per-row statistics, in double from the float inputs.
struct RowStats {
  double mean, rstd;
};
RowStats stats(const float* x, std::int64_t C) {
  double m = 0;
  for (std::int64_t j = 0; j < C; ++j) m += x[j];
  m /= static_cast<double>(C);
  double v = 0;
  for (std::int64_t j = 0; j < C; ++j) v += (x[j] - m) * (x[j] - m);
  return {m, 1.0 / std::sqrt(v / static_cast<double>(C) + kEps)};
}

// Row ranges as the engine gives them (planner::column_blocks over the rows) and whole.
std::vector<std::pair<std::int64_t, std::int64_t>> blocks(std::int64_t inner, std::int64_t n) {
  const popkit::planner::ColumnBlocks cb = popkit::planner::column_blocks(inner, n);
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t k = cb.n - 1; k >= 0; --k)  // last first: order must not matter
    out.emplace_back(k * cb.width, std::min(n, (k + 1) * cb.width));
  return out;
}

std::size_t at(std::int64_t i) {
  return static_cast<std::size_t>(i);
}

void check_forward(const LayerNormKernels& k, const Case& c, const Inputs& in) {
  const std::int64_t n = c.n, C = c.C;
  std::vector<float> out(at(n * C), kUnwritten), mean(at(n), kUnwritten), rstd(at(n), kUnwritten);
  k.forward_rows(in.x.data(), in.scale.data(), in.shift.data(), out.data(), mean.data(),
                 rstd.data(), C, kEps, 0, n);
  Mismatches m;
  for (std::int64_t i = 0; i < n; ++i) {
    const RowStats s = stats(&in.x[at(i * C)], C);
    m.near(mean[at(i)], s.mean, 2 * kU * std::abs(s.mean), "mean", i, 0);
    m.near(rstd[at(i)], s.rstd, 2 * kU * s.rstd, "rstd", i, 0);
    for (std::int64_t j = 0; j < C; ++j) {
      const double x = in.x[at(i * C + j)], scale = in.scale[at(j)], shift = in.shift[at(j)];
      const double want = (x - s.mean) * s.rstd * scale + shift;
      // x - mean, * rstd, * scale, + shift, each rounded, on a mean and rstd rounded once.
      const double tol =
          8 * kU * ((std::abs(x) + std::abs(s.mean)) * s.rstd * std::abs(scale) + std::abs(shift));
      m.near(out[at(i * C + j)], want, tol, "out", i, j);
    }
  }
  expect_none(m);
  // Without the statistics, and in the engine's row blocks: the same bits.
  std::vector<float> split(at(n * C), kUnwritten);
  for (const auto& [r0, r1] : blocks(C, n))
    k.forward_rows(in.x.data(), in.scale.data(), in.shift.data(), split.data(), nullptr, nullptr, C,
                   kEps, r0, r1);
  Mismatches same;
  for (std::int64_t e = 0; e < n * C; ++e)
    same.same_bits(split[at(e)], out[at(e)], "out", e / C, e % C);
  expect_none(same);
}

// dx and the parameters' gradients from the kernels' own kept statistics.
void check_backward(const LayerNormKernels& k, const Case& c, const Inputs& in, std::int64_t s) {
  const std::int64_t n = c.n, C = c.C;
  std::vector<float> out(at(n * C)), mean(at(n)), rstd(at(n));
  k.forward_rows(in.x.data(), in.scale.data(), in.shift.data(), out.data(), mean.data(),
                 rstd.data(), C, kEps, 0, n);
  std::vector<float> dx(at(n * C), kUnwritten);
  for (const auto& [r0, r1] : blocks(C, n))
    k.dx_rows(in.dy.data(), in.x.data(), in.scale.data(), mean.data(), rstd.data(), dx.data(), C,
              r0, r1);
  // Accumulators holding an earlier step's mean (NaN at s = 0: written whole).
  const std::vector<float> before = random_floats(C, 99);
  std::vector<float> gs(at(C), kUnwritten), gb(at(C), kUnwritten);
  if (s > 0) gs = gb = before;
  for (const auto& [c0, c1] : blocks(n, C))
    k.grad_columns(in.dy.data(), in.x.data(), mean.data(), rstd.data(), gs.data(), gb.data(), n, C,
                   s, c0, c1);
  Mismatches m;
  std::vector<Sum> want_gs(at(C)), want_gb(at(C));
  for (std::int64_t i = 0; i < n; ++i) {
    const double mu = mean[at(i)], r = rstd[at(i)];  // the kept values, as the kernels use
    Sum g, gn;                                       // sums over the row of g and g norm
    double spread = 0;                               // max |x - mean| r
    for (std::int64_t j = 0; j < C; ++j) {
      const double x = in.x[at(i * C + j)], dy = in.dy[at(i * C + j)];
      const double norm = (x - mu) * r;
      g.add(dy * in.scale[at(j)]);
      gn.add(dy * in.scale[at(j)] * norm);
      want_gs[at(j)].add(dy * norm);
      want_gb[at(j)].add(dy);
      spread = std::max(spread, (std::abs(x) + std::abs(mu)) * r);
    }
    const double cc = static_cast<double>(C);
    for (std::int64_t j = 0; j < C; ++j) {
      const double x = in.x[at(i * C + j)], dy = in.dy[at(i * C + j)], sc = in.scale[at(j)];
      const double norm = (x - mu) * r;
      const double want = (dy * sc - g.value / cc - norm * gn.value / cc) * r;
      // Each of g, norm and their products is a few rounded float operations away.
      const double tol = 16 * kU * r *
                         (std::abs(dy * sc) + g.magnitude / cc + spread * gn.magnitude / cc +
                          spread * g.magnitude / cc);
      m.near(dx[at(i * C + j)], want, tol, "dx", i, j);
    }
  }
  const double a = static_cast<double>(s) / static_cast<double>(s + 1);
  for (std::int64_t j = 0; j < C; ++j) {
    double spread = 0;
    for (std::int64_t i = 0; i < n; ++i)
      spread = std::max(
          spread, double{(std::abs(in.x[at(i * C + j)]) + std::abs(mean[at(i)])) * rstd[at(i)]});
    const double prev_s = s > 0 ? before[at(j)] : 0.0;
    const double want_s = a * prev_s + want_gs[at(j)].value / static_cast<double>(s + 1);
    const double want_b = a * prev_s + want_gb[at(j)].value / static_cast<double>(s + 1);
    const double tol_s = 8 * kU * (std::abs(prev_s) + spread * want_gb[at(j)].magnitude);
    const double tol_b = 8 * kU * (std::abs(prev_s) + want_gb[at(j)].magnitude);
    m.near(gs[at(j)], want_s, tol_s, "grad_scale", 0, j);
    m.near(gb[at(j)], want_b, tol_b, "grad_shift", 0, j);
  }
  expect_none(m);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layer_norm_kernels)

BOOST_AUTO_TEST_CASE(forward_against_double_at_every_level) {
  for (const Kernels* k : runnable_levels())
    for (const Case& c : cases())
      BOOST_TEST_CONTEXT(k->level << ", " << c.n << " rows x " << c.C << " features") {
        check_forward(kernels_at<LayerNormKernels>(*k), c,
                      Inputs(c, 17 * static_cast<std::uint64_t>(c.n * c.C)));
      }
}

BOOST_AUTO_TEST_CASE(backward_against_double_at_every_level) {
  for (const Kernels* k : runnable_levels())
    for (const Case& c : cases())
      for (const std::int64_t s : {0, 2})
        BOOST_TEST_CONTEXT(k->level << ", " << c.n << " rows x " << c.C << " features, s " << s) {
          check_backward(kernels_at<LayerNormKernels>(*k), c,
                         Inputs(c, 31 * static_cast<std::uint64_t>(c.n * c.C)), s);
        }
}

BOOST_AUTO_TEST_SUITE_END()
