// Every kernel level this CPU runs (engine/kernels) against a naive reference in double,
// at the shapes that take each path (the small-batch kernels for n <= 8, Eigen's GEMM
// above; column ranges that end inside a packet), and the choice of level itself. The
// awkward sizes, with tolerances from rounding bounds, and the optimizers' kernels:
// kernel_sizes_test.cpp and kernel_sizes_optimizer_test.cpp.
#include "engine/kernels/kernels.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/kernels/linear.h"
#include "engine/tensor/init.h"
#include "engine/tensor/layers.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using popkit::config::Activation;
using popkit::test::any_workspace;
using popkit::test::any_workspace_bytes;

namespace {

std::vector<float> random_floats(std::int64_t n, std::uint64_t key, double std = 1.0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  fill_normal(v.data(), n, 0.0, std, key);
  return v;
}

double act_ref(Activation a, double x) {
  switch (a) {
    case Activation::kGelu:
      return gelu(x);
    case Activation::kRelu:
      return x > 0 ? x : 0;
    case Activation::kNone:
      break;
  }
  return x;
}
double act_grad_ref(Activation a, double x) {
  switch (a) {
    case Activation::kGelu:
      return gelu_grad(x);
    case Activation::kRelu:
      return x > 0 ? 1 : 0;
    case Activation::kNone:
      break;
  }
  return 1;
}

// |got - want| within a float rounding of each of the `scale` terms summed.
void check_near(float got, double want, double scale, const std::string& what) {
  const double tol = 1e-5 * (scale + 1.0);
  BOOST_TEST(std::abs(double(got) - want) <= tol,
             what << ": got " << got << ", want " << want << " (tolerance " << tol << ")");
}

std::vector<const Kernels*> runnable_levels() {
  std::vector<const Kernels*> out;
  for (const Kernels* k : kernel_levels())
    if (runs_here(*k)) out.push_back(k);
  return out;
}

struct Shape {
  std::int64_t n, in, out;
};
// n <= 8 takes the small-batch kernels; 130 and 200 end inside a packet at every width.
const Shape kShapes[] = {{1, 5, 16}, {3, 64, 130}, {8, 130, 128}, {9, 33, 200}, {33, 70, 64}};

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_levels_test)

BOOST_AUTO_TEST_CASE(levels_are_listed_lowest_first_and_the_best_is_chosen) {
  const auto levels = kernel_levels();
  BOOST_REQUIRE(!levels.empty());
  BOOST_TEST(runs_here(*levels[0]), "the lowest level " << levels[0]->level << " must run");
  const auto runnable = runnable_levels();
  if (std::getenv("POPKIT_CPU_LEVEL") == nullptr) {
    BOOST_TEST(&kernels() == runnable.back(),
               "chose " << kernels().level << ", best is " << runnable.back()->level);
    BOOST_TEST(kernels_in_use().find("chosen from cpuid") != std::string::npos);
  } else {
    BOOST_TEST(std::string(kernels().level) == std::getenv("POPKIT_CPU_LEVEL"));
    BOOST_TEST(kernels_in_use().find("forced by POPKIT_CPU_LEVEL") != std::string::npos);
  }
  for (std::size_t i = 1; i < levels.size(); ++i)
    BOOST_TEST(std::string(levels[i]->level) != levels[i - 1]->level);
}

BOOST_AUTO_TEST_CASE(forward_matches_the_reference) {
  for (const Kernels* k : runnable_levels()) {
    for (const Shape& sh : kShapes) {
      for (const Activation act : {Activation::kNone, Activation::kGelu, Activation::kRelu}) {
        BOOST_TEST_CONTEXT(k->level << " n " << sh.n << " in " << sh.in << " out " << sh.out) {
          const auto x = random_floats(sh.n * sh.in, 1), w = random_floats(sh.in * sh.out, 2, 0.1),
                     b = random_floats(sh.out, 3);
          std::vector<float> pre(static_cast<std::size_t>(sh.n * sh.out), -7.0f), out(pre);
          // Two column ranges, the first ending inside a packet, as the engine's blocks do.
          const std::int64_t cut = std::min<std::int64_t>(sh.out, 13);
          kernels_at<LinearKernels>(*k).forward_columns(
              act, x.data(), w.data(), b.data(), pre.data(), out.data(), sh.n, sh.in, sh.out, 0,
              cut, any_workspace(), any_workspace_bytes());
          kernels_at<LinearKernels>(*k).forward_columns(
              act, x.data(), w.data(), b.data(), pre.data(), out.data(), sh.n, sh.in, sh.out, cut,
              sh.out, any_workspace(), any_workspace_bytes());
          for (std::int64_t i = 0; i < sh.n; ++i)
            for (std::int64_t j = 0; j < sh.out; ++j) {
              double sum = b[j], scale = std::abs(b[j]);
              for (std::int64_t q = 0; q < sh.in; ++q) {
                sum += double(x[i * sh.in + q]) * w[q * sh.out + j];
                scale += std::abs(double(x[i * sh.in + q]) * w[q * sh.out + j]);
              }
              const auto e = static_cast<std::size_t>(i * sh.out + j);
              check_near(pre[e], sum, scale, "pre");
              check_near(out[e], act_ref(act, sum), scale, "out");
            }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(backward_matches_the_reference) {
  for (const Kernels* k : runnable_levels()) {
    for (const Shape& sh : kShapes) {
      for (const std::int64_t s : {0, 2}) {  // a first and a later accumulation step
        BOOST_TEST_CONTEXT(k->level << " n " << sh.n << " in " << sh.in << " out " << sh.out
                                    << " s " << s) {
          const auto x = random_floats(sh.n * sh.in, 4), w = random_floats(sh.in * sh.out, 5, 0.1),
                     dz = random_floats(sh.n * sh.out, 6), gw0 = random_floats(sh.in * sh.out, 7),
                     gb0 = random_floats(sh.out, 8);
          std::vector<float> gw(gw0), gb(gb0), dx(static_cast<std::size_t>(sh.n * sh.in), -7.0f);
          const std::int64_t cut_out = std::min<std::int64_t>(sh.out, 40);
          kernels_at<LinearKernels>(*k).grad_columns(dz.data(), x.data(), gw.data(), gb.data(),
                                                     sh.n, sh.in, sh.out, s, 0, cut_out,
                                                     any_workspace(), any_workspace_bytes());
          kernels_at<LinearKernels>(*k).grad_columns(dz.data(), x.data(), gw.data(), gb.data(),
                                                     sh.n, sh.in, sh.out, s, cut_out, sh.out,
                                                     any_workspace(), any_workspace_bytes());
          const std::int64_t cut_in = std::min<std::int64_t>(sh.in, 3);
          kernels_at<LinearKernels>(*k).dx_columns(dz.data(), w.data(), dx.data(), sh.n, sh.in,
                                                   sh.out, 0, cut_in, any_workspace(),
                                                   any_workspace_bytes());
          kernels_at<LinearKernels>(*k).dx_columns(dz.data(), w.data(), dx.data(), sh.n, sh.in,
                                                   sh.out, cut_in, sh.in, any_workspace(),
                                                   any_workspace_bytes());
          const double a = double(s) / double(s + 1);
          for (std::int64_t q = 0; q < sh.in; ++q)
            for (std::int64_t j = 0; j < sh.out; ++j) {
              const auto e = static_cast<std::size_t>(q * sh.out + j);
              double sum = s == 0 ? 0.0 : a * gw0[e], scale = std::abs(sum);
              for (std::int64_t i = 0; i < sh.n; ++i) {
                sum += double(x[i * sh.in + q]) * dz[i * sh.out + j];
                scale += std::abs(double(x[i * sh.in + q]) * dz[i * sh.out + j]);
              }
              check_near(gw[e], sum, scale, "grad weight");
            }
          for (std::int64_t j = 0; j < sh.out; ++j) {
            double sum = s == 0 ? 0.0 : a * gb0[j], scale = std::abs(sum);
            for (std::int64_t i = 0; i < sh.n; ++i) {
              sum += dz[i * sh.out + j];
              scale += std::abs(double(dz[i * sh.out + j]));
            }
            check_near(gb[j], sum, scale, "grad bias");
          }
          for (std::int64_t i = 0; i < sh.n; ++i)
            for (std::int64_t q = 0; q < sh.in; ++q) {
              double sum = 0, scale = 0;
              for (std::int64_t j = 0; j < sh.out; ++j) {
                sum += double(dz[i * sh.out + j]) * w[q * sh.out + j];
                scale += std::abs(double(dz[i * sh.out + j]) * w[q * sh.out + j]);
              }
              check_near(dx[static_cast<std::size_t>(i * sh.in + q)], sum, scale, "dx");
            }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(activations_loss_and_elementwise_match_the_reference) {
  const std::int64_t n = 1000, classes = 10, rows = n / classes;
  const auto pre = random_floats(n, 9, 3.0), dy0 = random_floats(n, 10);
  for (const Kernels* k : runnable_levels()) {
    BOOST_TEST_CONTEXT(k->level) {
      for (const Activation act : {Activation::kNone, Activation::kGelu, Activation::kRelu}) {
        std::vector<float> dy(dy0);
        kernels_at<LinearKernels>(*k).activation_backward(act, pre.data(), dy.data(), n);
        for (std::size_t i = 0; i < dy.size(); ++i)
          check_near(dy[i], dy0[i] * act_grad_ref(act, pre[i]), std::abs(dy0[i]), "dz");
      }
      std::vector<float> labels(static_cast<std::size_t>(rows)), dlogits(pre.size());
      for (std::int64_t i = 0; i < rows; ++i)
        labels[static_cast<std::size_t>(i)] = float(i % classes);
      const float loss =
          k->softmax_cross_entropy(pre.data(), labels.data(), dlogits.data(), rows, classes);
      double total = 0;
      for (std::int64_t i = 0; i < rows; ++i) {
        const float* row = pre.data() + i * classes;
        double z = 0;
        for (std::int64_t j = 0; j < classes; ++j) z += std::exp(double(row[j]));
        total += std::log(z) - row[i % classes];
        for (std::int64_t j = 0; j < classes; ++j) {
          const double want = (std::exp(double(row[j])) / z - (j == i % classes ? 1 : 0)) / rows;
          check_near(dlogits[static_cast<std::size_t>(i * classes + j)], want, 0.01, "dlogits");
        }
      }
      check_near(loss, total / rows, 1.0, "loss");
      // Sums and quotients are correctly rounded at every level: bitwise equal.
      std::vector<float> x(dy0);
      std::vector<float> z(x.size());
      const float* terms[] = {dy0.data(), pre.data()};
      k->reduce(z.data(), terms, 2, 0, n, 1.0f);
      for (std::size_t i = 0; i < z.size(); ++i) BOOST_TEST(z[i] == dy0[i] + pre[i]);
      k->divide(x.data(), 3.0f, n);
      for (std::size_t i = 0; i < x.size(); ++i) BOOST_TEST(x[i] == dy0[i] / 3.0f);
    }
  }
}

BOOST_AUTO_TEST_CASE(each_level_is_deterministic) {
  const Shape sh{8, 784, 512};
  const auto x = random_floats(sh.n * sh.in, 14), w = random_floats(sh.in * sh.out, 15, 0.05),
             b = random_floats(sh.out, 16);
  for (const Kernels* k : runnable_levels()) {
    BOOST_TEST_CONTEXT(k->level) {
      std::vector<float> first(static_cast<std::size_t>(sh.n * sh.out)), again(first.size());
      // In kColumnBlock blocks as the engine's threads run them, in another order the
      // second time: the blocks are fixed by the shapes, so the bits must be too.
      const std::int64_t n_blocks = (sh.out + kColumnBlock - 1) / kColumnBlock;
      for (std::int64_t pass = 0; pass < 2; ++pass) {
        std::vector<float>& y = pass == 0 ? first : again;
        for (std::int64_t q = 0; q < n_blocks; ++q) {
          const std::int64_t blk = pass == 0 ? q : n_blocks - 1 - q;
          const std::int64_t j0 = blk * kColumnBlock;
          kernels_at<LinearKernels>(*k).forward_columns(
              Activation::kGelu, x.data(), w.data(), b.data(), y.data(), y.data(), sh.n, sh.in,
              sh.out, j0, std::min(sh.out, j0 + kColumnBlock), any_workspace(),
              any_workspace_bytes());
        }
      }
      BOOST_TEST(first == again, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
