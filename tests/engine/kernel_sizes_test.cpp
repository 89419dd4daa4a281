// The layers' kernels of every level this CPU runs (the linear GEMMs with their fused bias
// and activation, activation backward, softmax cross-entropy, the elementwise ones) and
// dropout, against a naive reference in double at awkward sizes: 1, 7, 17 and 513 columns
// (one; less than a packet; a packet and one; four kColumnBlock blocks and one), 1, 3 and
// 64 rows (the small-batch kernels, then Eigen's GEMM), odd inner sizes; column ranges
// whole, in the engine's blocks, in the middle and the last column alone, with every
// column outside a range checked untouched. Tolerances: tests/support/kernel_check.h.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <utility>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/kernels/linear.h"
#include "engine/tensor/dropout.h"
#include "engine/tensor/layers.h"
#include "planner/workspace.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using namespace popkit::test;
using popkit::config::Activation;

namespace {

constexpr double kFloatMin = std::numeric_limits<float>::min();

// ---- shapes and column ranges ----------------------------------------------------------

struct Shape {
  std::int64_t n, in, out;
};

// Rows 1 and 3 take the small-batch kernels (n <= 8), 64 Eigen's GEMM. 16 columns are a
// whole number of packets at every level: only then does dx take its small-batch kernel.
// All combinations but 513 x 513 (a quarter million outputs to check per call, seconds at
// -O0), whose sizes each appear with every other.
std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (const std::int64_t n : {1, 3, 64})
    for (const std::int64_t in : {1, 7, 17, 513})
      for (const std::int64_t out : {1, 7, 16, 17, 513})
        if (in * out < 513 * 513) all.push_back({n, in, out});
  return all;
}

// The column ranges [j0, j1) of a sequence of kernel calls; together they cover the
// columns [begin, end).
struct Split {
  const char* name;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::int64_t begin, end;

  bool covers(std::int64_t j) const { return begin <= j && j < end; }
};

// Whole; the engine's kColumnBlock blocks, last first; a middle block starting off every
// packet boundary; the last column alone.
std::vector<Split> splits(std::int64_t columns) {
  std::vector<std::pair<std::int64_t, std::int64_t>> blocks;
  for (std::int64_t j0 = (columns - 1) / kColumnBlock * kColumnBlock; j0 >= 0; j0 -= kColumnBlock)
    blocks.emplace_back(j0, std::min(columns, j0 + kColumnBlock));
  const std::int64_t third = columns / 3;
  return {{"whole", {{0, columns}}, 0, columns},
          {"blocks", blocks, 0, columns},
          {"middle", {{third, columns - third}}, third, columns - third},
          {"last column", {{columns - 1, columns}}, columns - 1, columns}};
}

// ---- workspace -------------------------------------------------------------------------

// The GEMM packed within the planned bound (planner/workspace.h), and, when it ran on
// every column (more rows than the small-batch kernels take), filled the bound to its
// last 64-byte line: the bound is exact, not merely safe.
void check_workspace(Mismatches& m, const GuardedWorkspace& ws, std::int64_t n, std::int64_t j0,
                     std::int64_t j1) {
  if (!ws.guard_intact())
    m.note(fmt::format("columns [{}, {}): the kernel wrote past its {} workspace bytes", j0, j1,
                       ws.bytes()));
  if (n > kSmallRows && ws.touched() + popkit::planner::kWorkspaceAlign <= ws.bytes())
    m.note(fmt::format("columns [{}, {}): the kernel used {} of its {} workspace bytes", j0, j1,
                       ws.touched(), ws.bytes()));
}

// ---- activations -----------------------------------------------------------------------

const char* name(Activation act) {
  switch (act) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kRelu:
      return "relu";
    case Activation::kNone:
      break;
  }
  return "none";
}

// PopXL's gelu as layers.h documents it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// and its derivative 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
double gelu_ref(double x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double gelu_grad_ref(double x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}
double act_ref(Activation act, double x) {
  switch (act) {
    case Activation::kGelu:
      return gelu_ref(x);
    case Activation::kRelu:
      return x > 0 ? x : 0;
    case Activation::kNone:
      break;
  }
  return x;
}
// The largest |act'|: gelu's slope peaks at 1.129 (x = 1.42).
double act_slope(Activation act) {
  return act == Activation::kGelu ? 1.13 : 1.0;
}

// gelu in float: Eigen's tanh is a rational approximation within a few ulp, and the
// argument and 0.5 x (1 + t) add about six roundings, all relative to |x| (|gelu x| <= |x|,
// |t| <= 1): 16 u |x| bounds it with room (the levels here reach 3 u |x|).
double gelu_tolerance(double x) {
  return 16 * kU * std::abs(x) + kFloatMin;
}

// out = act(pre), both in float: none and relu are exact, gelu within gelu_tolerance.
void check_activation(Mismatches& m, Activation act, float pre, float out, std::int64_t r,
                      std::int64_t c) {
  switch (act) {
    case Activation::kNone:
      m.same_bits(out, pre, "out", r, c);
      return;
    case Activation::kRelu:
      m.same_bits(out, pre > 0 ? pre : 0.0f, "out", r, c);
      return;
    case Activation::kGelu:
      m.near(out, gelu_ref(pre), gelu_tolerance(pre), "out", r, c);
      return;
  }
}

// ---- dropout ---------------------------------------------------------------------------

// splitmix64 as random.h specifies it, written out again: masks are a documented
// function of their key, and a change to the generator would change every run's masks.
std::uint64_t splitmix64_ref(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// dropout.h's rule: the key of (seed, step, sample, layer) is splitmix64 of the seed,
// then of the key xor each part in turn; element j is kept iff the top 24 bits of
// splitmix64 from key + j are at least rate 2^24 (rounded down).
bool kept(std::uint64_t seed, std::int64_t step, std::int64_t sample, std::int64_t layer,
          std::int64_t j, double rate) {
  std::uint64_t state = seed;
  std::uint64_t key = splitmix64_ref(state);
  for (const std::int64_t part : {step, sample, layer}) {
    state = key ^ static_cast<std::uint64_t>(part);
    key = splitmix64_ref(state);
  }
  std::uint64_t draw = key + static_cast<std::uint64_t>(j);
  return (splitmix64_ref(draw) >> 40) >= static_cast<std::uint64_t>(rate * 16777216.0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_sizes)

// pre = x W + b and out = act(pre) on columns [j0, j1): pre within the tolerance of a sum of
// in + 1 terms (the bias one of them), out = act(pre) as computed; with out = pre (the
// engine's layers without activation), act of the reference within act's slope times that.
BOOST_AUTO_TEST_CASE(linear_forward_with_bias_and_activation) {
  const auto levels = runnable_levels();
  for (const Shape& sh : shapes()) {
    const auto [n, in, c] = sh;
    const auto x = random_floats(n * in, 1), w = random_floats(in * c, 2, 0.1),
               b = random_floats(c, 3);
    std::vector<double> ref(static_cast<std::size_t>(n * c)), tol(ref.size());
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < c; ++j) {
        Sum sum;
        sum.add(b[j]);
        for (std::int64_t q = 0; q < in; ++q) sum.add(double(x[i * in + q]) * w[q * c + j]);
        ref[i * c + j] = sum.value;
        tol[i * c + j] = sum_tolerance(in + 1, sum.magnitude);
      }
    struct Run {
      Activation act;
      Split split;
      bool in_place;
    };
    const auto sp = splits(c);
    // Each activation and each split at least once, out = pre on a part and on blocks.
    const std::vector<Run> runs{
        {Activation::kNone, sp[0], false}, {Activation::kRelu, sp[1], false},
        {Activation::kGelu, sp[0], false}, {Activation::kGelu, sp[2], false},
        {Activation::kGelu, sp[3], false}, {Activation::kNone, sp[2], true},
        {Activation::kGelu, sp[1], true}};
    for (const Kernels* k : levels) {
      for (const Run& run : runs) {
        BOOST_TEST_CONTEXT(k->level << ", n " << n << ", in " << in << ", out " << c << ", "
                                    << name(run.act) << ", " << run.split.name
                                    << (run.in_place ? ", out = pre" : "")) {
          std::vector<float> pre(ref.size(), kUnwritten), out(pre);
          float* o = run.in_place ? pre.data() : out.data();
          Mismatches m;
          for (const auto& [j0, j1] : run.split.ranges) {
            const GuardedWorkspace ws(
                popkit::planner::linear_forward_call_workspace(n, in, j0, j1));
            kernels_at<LinearKernels>(*k).forward_columns(run.act, x.data(), w.data(), b.data(),
                                                          pre.data(), o, n, in, c, j0, j1,
                                                          ws.data(), ws.bytes());
            check_workspace(m, ws, n, j0, j1);
          }
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < c; ++j) {
              const auto e = static_cast<std::size_t>(i * c + j);
              if (run.in_place || !run.split.covers(j))
                m.same_bits(out[e], kUnwritten, "out (not to be written)", i, j);
              if (!run.split.covers(j)) {
                m.same_bits(pre[e], kUnwritten, "pre (outside the range)", i, j);
              } else if (run.in_place) {
                const double t =
                    act_slope(run.act) * tol[e] + (run.act == Activation::kGelu
                                                       ? gelu_tolerance(std::abs(ref[e]) + tol[e])
                                                       : 0.0);
                m.near(pre[e], act_ref(run.act, ref[e]), t, "out = pre", i, j);
              } else {
                m.near(pre[e], ref[e], tol[e], "pre", i, j);
                check_activation(m, run.act, pre[e], out[e], i, j);
              }
            }
          expect_none(m);
        }
      }
    }
  }
}

// gw = a gw + x^T dz and gb = a gb + column sums of dz on columns [j0, j1), a = s/(s+1)
// (dz arrives divided by s + 1); at s = 0 the accumulators' old values (NaN here) are
// ignored. n terms, a acc, and a's own rounding: the tolerance of n + 1 terms.
BOOST_AUTO_TEST_CASE(linear_weight_and_bias_gradients_at_each_repeat_step) {
  const auto levels = runnable_levels();
  for (const Shape& sh : shapes()) {
    const auto [n, in, c] = sh;
    const auto x = random_floats(n * in, 4), dz = random_floats(n * c, 5),
               gw0 = random_floats(in * c, 6), gb0 = random_floats(c, 7);
    std::vector<Sum> xt_dz(static_cast<std::size_t>(in * c)), dz_sum(static_cast<std::size_t>(c));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < c; ++j) {
        for (std::int64_t q = 0; q < in; ++q)
          xt_dz[q * c + j].add(double(x[i * in + q]) * dz[i * c + j]);
        dz_sum[j].add(dz[i * c + j]);
      }
    const auto sp = splits(c);
    // s = 0, 1 and 3, each split at least once.
    const std::pair<std::int64_t, const Split*> runs[] = {
        {0, &sp[0]}, {0, &sp[2]}, {1, &sp[1]}, {1, &sp[3]}, {3, &sp[0]}};
    for (const Kernels* k : levels) {
      for (const auto& [s, split] : runs) {
        BOOST_TEST_CONTEXT(k->level << ", n " << n << ", in " << in << ", out " << c << ", s " << s
                                    << ", " << split->name) {
          std::vector<float> gw(gw0), gb(gb0);
          if (s == 0) {
            std::fill(gw.begin(), gw.end(), kUnwritten);
            std::fill(gb.begin(), gb.end(), kUnwritten);
          }
          const std::vector<float> gw_before(gw), gb_before(gb);
          Mismatches m;
          for (const auto& [j0, j1] : split->ranges) {
            const GuardedWorkspace ws(popkit::planner::linear_grad_call_workspace(n, in, j0, j1));
            kernels_at<LinearKernels>(*k).grad_columns(dz.data(), x.data(), gw.data(), gb.data(), n,
                                                       in, c, s, j0, j1, ws.data(), ws.bytes());
            check_workspace(m, ws, n, j0, j1);
          }
          // acc = a old + sum (old ignored at s = 0), within the tolerance of n + 1 terms.
          const double a = double(s) / double(s + 1);
          const auto check = [&](float got, float old, const Sum& sum, const char* what,
                                 std::int64_t r, std::int64_t j) {
            const double acc = s == 0 ? 0.0 : a * old;
            m.near(got, acc + sum.value, sum_tolerance(n + 1, std::abs(acc) + sum.magnitude), what,
                   r, j);
          };
          for (std::int64_t j = 0; j < c; ++j) {
            const bool inside = split->covers(j);
            for (std::int64_t q = 0; q < in; ++q) {
              const auto e = static_cast<std::size_t>(q * c + j);
              if (inside)
                check(gw[e], gw0[e], xt_dz[e], "grad weight", q, j);
              else
                m.same_bits(gw[e], gw_before[e], "grad weight (outside the range)", q, j);
            }
            if (inside)
              check(gb[j], gb0[j], dz_sum[j], "grad bias", 0, j);
            else
              m.same_bits(gb[j], gb_before[j], "grad bias (outside the range)", 0, j);
          }
          expect_none(m);
        }
      }
    }
  }
}

// dx = dz W^T on columns [i0, i1) of dx: sums of out terms.
BOOST_AUTO_TEST_CASE(linear_input_gradient) {
  const auto levels = runnable_levels();
  for (const Shape& sh : shapes()) {
    const auto [n, in, c] = sh;
    const auto dz = random_floats(n * c, 8), w = random_floats(in * c, 9, 0.1);
    std::vector<Sum> ref(static_cast<std::size_t>(n * in));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t q = 0; q < in; ++q)
        for (std::int64_t j = 0; j < c; ++j)
          ref[i * in + q].add(double(dz[i * c + j]) * w[q * c + j]);
    for (const Kernels* k : levels) {
      for (const Split& split : splits(in)) {
        BOOST_TEST_CONTEXT(k->level << ", n " << n << ", in " << in << ", out " << c << ", "
                                    << split.name) {
          std::vector<float> dx(ref.size(), kUnwritten);
          Mismatches m;
          for (const auto& [i0, i1] : split.ranges) {
            const GuardedWorkspace ws(popkit::planner::linear_dx_call_workspace(n, c, i0, i1));
            kernels_at<LinearKernels>(*k).dx_columns(dz.data(), w.data(), dx.data(), n, in, c, i0,
                                                     i1, ws.data(), ws.bytes());
            check_workspace(m, ws, n, i0, i1);
          }
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t q = 0; q < in; ++q) {
              const auto e = static_cast<std::size_t>(i * in + q);
              if (split.covers(q))
                m.near(dx[e], ref[e].value, sum_tolerance(c, ref[e].magnitude), "dx", i, q);
              else
                m.same_bits(dx[e], kUnwritten, "dx (outside the range)", i, q);
            }
          expect_none(m);
        }
      }
    }
  }
}

// The engine's sequence over S repeat steps: dz /= s + 1 (divide, for s > 0), then the
// gradient kernel; the accumulators end as the mean over the steps of x_s^T dz_s and of
// dz_s's column sums. Each step adds at most (n + 3) u (n products, a acc, a's rounding
// and the division) of twice M, the sum over all steps of |terms| (the old accumulator is
// at most M): 2 S (n + 3) u M in all, far below the O(M / S) of a wrong mean.
BOOST_AUTO_TEST_CASE(gradients_over_repeat_steps_are_their_mean) {
  constexpr std::int64_t kSteps = 3;
  for (const Shape sh : {Shape{3, 7, 17}, Shape{64, 17, 513}}) {
    const auto [n, in, c] = sh;
    std::vector<std::vector<float>> xs, dzs;
    for (std::int64_t s = 0; s < kSteps; ++s) {
      xs.push_back(random_floats(n * in, 10 + s));
      dzs.push_back(random_floats(n * c, 20 + s));
    }
    std::vector<Sum> gw_ref(static_cast<std::size_t>(in * c)), gb_ref(static_cast<std::size_t>(c));
    for (std::int64_t s = 0; s < kSteps; ++s)
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < c; ++j) {
          const double d = dzs[s][i * c + j];
          for (std::int64_t q = 0; q < in; ++q) gw_ref[q * c + j].add(xs[s][i * in + q] * d);
          gb_ref[j].add(d);
        }
    for (const Kernels* k : runnable_levels()) {
      BOOST_TEST_CONTEXT(k->level << ", n " << n << ", in " << in << ", out " << c) {
        std::vector<float> gw(gw_ref.size(), kUnwritten), gb(gb_ref.size(), kUnwritten);
        for (std::int64_t s = 0; s < kSteps; ++s) {
          std::vector<float> dz(dzs[s]);
          if (s > 0) k->divide(dz.data(), static_cast<float>(s + 1), n * c);
          kernels_at<LinearKernels>(*k).grad_columns(dz.data(), xs[s].data(), gw.data(), gb.data(),
                                                     n, in, c, s, 0, c, any_workspace(),
                                                     any_workspace_bytes());
        }
        const auto tol = [&](const Sum& sum) {
          return 2.0 * kSteps * sum_tolerance(n + 2, sum.magnitude);
        };
        Mismatches m;
        for (std::size_t e = 0; e < gw.size(); ++e)
          m.near(gw[e], gw_ref[e].value / kSteps, tol(gw_ref[e]), "mean grad weight",
                 std::int64_t(e) / c, std::int64_t(e) % c);
        for (std::size_t j = 0; j < gb.size(); ++j)
          m.near(gb[j], gb_ref[j].value / kSteps, tol(gb_ref[j]), "mean grad bias", 0,
                 std::int64_t(j));
        expect_none(m);
      }
    }
  }
}

// ---- elementwise kernels, at 1, 7, 17 and 513 elements ------------------------------------

// dz = dy act'(pre): none and relu exact; gelu' in float is a sum of two terms that
// cancel near x = -0.75, so its error is relative to |dy| (1 + |x|^3) (the second term's
// size, and the slope of the expression in t times tanh's error), 16 u of that with
// room (the levels here reach 2 u).
BOOST_AUTO_TEST_CASE(activation_backward_and_elementwise) {
  for (const std::int64_t size : {1, 7, 17, 513}) {
    const auto pre = random_floats(size, 30, 3.0), dy0 = random_floats(size, 31);
    for (const Kernels* k : runnable_levels()) {
      BOOST_TEST_CONTEXT(k->level << ", " << size << " elements") {
        Mismatches m;
        for (const Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
          std::vector<float> dy(dy0);
          kernels_at<LinearKernels>(*k).activation_backward(act, pre.data(), dy.data(), size);
          for (std::int64_t i = 0; i < size; ++i) {
            const double x = pre[i];
            if (act == Activation::kGelu)
              m.near(dy[i], dy0[i] * gelu_grad_ref(x),
                     16 * kU * std::abs(dy0[i]) * (1 + std::abs(x * x * x)), "dz gelu", 0, i);
            else
              m.same_bits(dy[i], act == Activation::kRelu && !(pre[i] > 0) ? 0.0f : dy0[i],
                          name(act), 0, i);
          }
        }
        // Sums and quotients are correctly rounded: bit for bit. The reduction's terms in
        // order, ((a + b) + c) / 3, into a fresh output and in place in its second term.
        std::vector<float> x(dy0), out(dy0.size(), kUnwritten), c = random_floats(size, 99);
        const float* terms[] = {dy0.data(), pre.data(), c.data()};
        k->reduce(out.data(), terms, 3, 0, size, 3.0f);
        std::vector<float> in_place(pre);
        const float* aliased[] = {dy0.data(), in_place.data(), c.data()};
        k->reduce(in_place.data(), aliased, 3, 0, size, 1.0f);
        for (std::int64_t i = 0; i < size; ++i) {
          m.same_bits(out[i], ((dy0[i] + pre[i]) + c[i]) / 3.0f, "reduce", 0, i);
          m.same_bits(in_place[i], (dy0[i] + pre[i]) + c[i], "reduce in place", 0, i);
        }
        k->divide(x.data(), 7.0f, size);
        for (std::int64_t i = 0; i < size; ++i) m.same_bits(x[i], dy0[i] / 7.0f, "divide", 0, i);
        expect_none(m);
      }
    }
  }
}

// loss = mean over rows of log sum exp(l - max) - (l[label] - max) and dlogits =
// (softmax - onehot) / rows, with `classes` columns. With D the row's largest l - max in
// magnitude, each exp(l - max) is within (D + 2) u, their sum within another `classes` u
// and softmax within twice that: (classes + 2 D + 8) u of |softmax| + onehot for dlogits,
// the same of 1 + |log sum| per row for the loss, plus the mean's rows + 1 roundings.
BOOST_AUTO_TEST_CASE(softmax_cross_entropy_over_awkward_class_counts) {
  for (const std::int64_t classes : {1, 7, 17, 513}) {
    for (const std::int64_t rows : {1, 3, 64}) {
      const auto logits = random_floats(rows * classes, 32, 3.0);
      std::vector<float> labels(static_cast<std::size_t>(rows));
      for (std::int64_t i = 0; i < rows; ++i) labels[i] = float((5 * i + 3) % classes);
      std::vector<double> dref(logits.size()), dtol(logits.size());
      double loss = 0, loss_tol = 0, loss_magnitude = 0;
      for (std::int64_t i = 0; i < rows; ++i) {
        const float* l = logits.data() + i * classes;
        const auto label = static_cast<std::int64_t>(labels[i]);
        const double max = *std::max_element(l, l + classes);
        double z = 0, d = 0;
        for (std::int64_t j = 0; j < classes; ++j) {
          z += std::exp(l[j] - max);
          d = std::max(d, max - l[j]);
        }
        const double k = double(classes) + 2 * d + 8;
        for (std::int64_t j = 0; j < classes; ++j) {
          const double p = std::exp(l[j] - max) / z, y = j == label ? 1.0 : 0.0;
          dref[i * classes + j] = (p - y) / double(rows);
          dtol[i * classes + j] = k * kU * (p + y) / double(rows);
        }
        const double row_loss = std::log(z) - (l[label] - max);
        loss += row_loss / double(rows);
        loss_magnitude += std::abs(row_loss) / double(rows);
        loss_tol += k * kU * (1 + std::abs(std::log(z))) / double(rows);
      }
      loss_tol += sum_tolerance(rows, loss_magnitude);
      for (const Kernels* k : runnable_levels()) {
        BOOST_TEST_CONTEXT(k->level << ", rows " << rows << ", classes " << classes) {
          std::vector<float> dlogits(logits.size(), kUnwritten);
          const float got =
              k->softmax_cross_entropy(logits.data(), labels.data(), dlogits.data(), rows, classes);
          Mismatches m;
          m.near(got, loss, loss_tol, "loss", 0, 0);
          for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < classes; ++j)
              m.near(dlogits[i * classes + j], dref[i * classes + j], dtol[i * classes + j],
                     "dlogits", i, j);
          expect_none(m);
        }
      }
    }
  }
}

// Forward (x -> y), backward (dy -> dx, the same call) and in place: each element is the
// input times the float 1 / (1 - rate), or 0, as the mask reproduced from the documented
// key of its row's sample says, bit for bit (one correctly rounded product).
BOOST_AUTO_TEST_CASE(dropout_forward_and_backward_apply_the_keyed_mask) {
  const std::uint64_t seed = 42;
  const std::int64_t step = 5, layer = 3, first_sample = 11;
  for (const std::int64_t width : {1, 7, 17, 513}) {
    for (const std::int64_t rows : {1, 3, 64}) {
      for (const double rate : {0.1, 0.5, 0.9}) {
        BOOST_TEST_CONTEXT("width " << width << ", rows " << rows << ", rate " << rate) {
          const auto x = random_floats(rows * width, 60), dy = random_floats(rows * width, 61);
          std::vector<float> y(x.size(), kUnwritten), dx(y), in_place(x);
          dropout_rows(x.data(), y.data(), rows, width, rate, seed, step, first_sample, layer);
          dropout_rows(dy.data(), dx.data(), rows, width, rate, seed, step, first_sample, layer);
          dropout_rows(in_place.data(), in_place.data(), rows, width, rate, seed, step,
                       first_sample, layer);
          const auto scale = static_cast<float>(1.0 / (1.0 - rate));
          Mismatches m;
          for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < width; ++j) {
              const bool keep = kept(seed, step, first_sample + i, layer, j, rate);
              const auto e = static_cast<std::size_t>(i * width + j);
              m.same_bits(y[e], keep ? x[e] * scale : 0.0f, "forward", i, j);
              m.same_bits(dx[e], keep ? dy[e] * scale : 0.0f, "backward", i, j);
              m.same_bits(in_place[e], y[e], "in place", i, j);
            }
          expect_none(m);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
