// Backward passes of the linear layer, GELU, ReLU and the softmax cross-entropy against
// central finite differences in double precision, and exact values of tiny cases.
#include "engine/tensor/layers.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "engine/tensor/init.h"

using namespace popkit::engine;
using popkit::config::Activation;

namespace {

std::vector<double> random_values(std::size_t n, std::uint64_t key, double std = 1.0) {
  std::vector<float> f(n);
  fill_normal(f.data(), static_cast<std::int64_t>(n), 0.0, std, key);
  return {f.begin(), f.end()};
}

// Central difference of a scalar function of `x` with step h.
std::vector<double> numeric_grad(std::vector<double>& x, const std::function<double()>& f,
                                 double h = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f();
    x[i] = keep - h;
    const double down = f();
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

void check_close(const std::vector<double>& analytic, const std::vector<double>& numeric,
                 double tol) {
  BOOST_REQUIRE_EQUAL(analytic.size(), numeric.size());
  for (std::size_t i = 0; i < analytic.size(); ++i)
    BOOST_TEST(std::abs(analytic[i] - numeric[i]) <= tol * (1.0 + std::abs(numeric[i])),
               "element " << i << ": analytic " << analytic[i] << " numeric " << numeric[i]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layers)

BOOST_AUTO_TEST_CASE(linear_forward_exact) {
  // x [2, 3], W [3, 2], b [2]
  const std::vector<float> x{1, 2, 3, 4, 5, 6}, w{1, 0, 0, 1, 1, 1}, b{0.5f, -1};
  std::vector<float> y(4);
  linear_forward(x.data(), w.data(), b.data(), y.data(), 2, 3, 2);
  BOOST_TEST(y == (std::vector<float>{4.5f, 4, 10.5f, 10}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gelu_values) {
  BOOST_TEST(gelu(0.0) == 0.0);
  // 0.5 * 1 * (1 + tanh(sqrt(2/pi) * 1.044715))
  BOOST_TEST(std::abs(gelu(1.0) - 0.8411919906082768) < 1e-15);
  BOOST_TEST(std::abs(gelu(-1.0) - -0.15880800939172324) < 1e-15);
}

// Loss L = sum(out * r) for a fixed random r: dL/dout = r, through act and linear.
BOOST_AUTO_TEST_CASE(linear_and_activations_backward_match_finite_differences) {
  const std::int64_t n = 3, in = 4, out = 5;
  for (const Activation act : {Activation::kNone, Activation::kGelu, Activation::kRelu}) {
    BOOST_TEST_CONTEXT("activation " << static_cast<int>(act)) {
      auto x = random_values(n * in, 1);
      auto w = random_values(in * out, 2);
      auto b = random_values(out, 3);
      const auto r = random_values(n * out, 4);
      std::vector<double> pre(n * out), y(n * out);
      auto loss = [&] {
        linear_forward(x.data(), w.data(), b.data(), pre.data(), n, in, out);
        activation_forward(act, pre.data(), y.data(), n * out);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
        return s;
      };
      loss();
      std::vector<double> dz = r, dx(n * in), gw(in * out), gb(out);
      activation_backward(act, pre.data(), dz.data(), n * out);
      linear_backward(dz.data(), x.data(), w.data(), dx.data(), gw.data(), gb.data(), n, in, out);
      // ReLU's kink: finite differences are exact away from 0 (values are ~N(0,1)).
      check_close(dx, numeric_grad(x, loss), 1e-7);
      check_close(gw, numeric_grad(w, loss), 1e-7);
      check_close(gb, numeric_grad(b, loss), 1e-7);
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_matches_finite_differences) {
  const std::int64_t n = 4, classes = 6;
  auto logits = random_values(n * classes, 7, 2.0);
  const std::vector<double> labels{0, 5, 2, 2};
  std::vector<double> d(n * classes), scratch(n * classes);
  auto loss = [&] {
    return softmax_cross_entropy(logits.data(), labels.data(), scratch.data(), n, classes);
  };
  softmax_cross_entropy(logits.data(), labels.data(), d.data(), n, classes);
  check_close(d, numeric_grad(logits, loss), 1e-8);
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_exact) {
  // Uniform logits over 4 classes: loss = log 4, dlogits = (1/4 - onehot) / n.
  const std::vector<float> logits(8, 0.0f), labels{1, 3};
  std::vector<float> d(8);
  const float loss = softmax_cross_entropy(logits.data(), labels.data(), d.data(), 2, 4);
  BOOST_TEST(loss == std::log(4.0f));
  BOOST_TEST(
      d == (std::vector<float>{0.125f, -0.375f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, -0.375f}),
      boost::test_tools::per_element());
}

// A training plan's loss writes the gradient over the logits: the same loss and the
// same bits as into a tensor of its own, the label's logit at every position of a row.
BOOST_AUTO_TEST_CASE(softmax_cross_entropy_in_place_is_bitwise_the_same) {
  const std::int64_t n = 5, classes = 7;
  const auto logits = random_values(n * classes, 11, 3.0);
  std::vector<float> in_place(logits.begin(), logits.end()), apart(n * classes);
  const std::vector<float> x(in_place), labels{0, 6, 3, 3, 1};
  const float a = softmax_cross_entropy(x.data(), labels.data(), apart.data(), n, classes);
  const float b =
      softmax_cross_entropy(in_place.data(), labels.data(), in_place.data(), n, classes);
  BOOST_TEST(std::memcmp(&a, &b, sizeof a) == 0);
  BOOST_TEST(std::memcmp(apart.data(), in_place.data(), apart.size() * sizeof(float)) == 0);
}

BOOST_AUTO_TEST_CASE(running_mean_accumulation) {
  // acc = s/(s+1) acc + g/(s+1): after g = 1, 2, 6 the mean is 3.
  std::vector<float> acc{123.0f};  // stale value, ignored at s = 0
  for (std::int64_t s = 0; s < 3; ++s) {
    const float g = s == 0 ? 1.0f : s == 1 ? 2.0f : 6.0f;
    accumulate_running_mean(acc.data(), &g, 1, s);
  }
  BOOST_TEST(acc[0] == 3.0f);
}

BOOST_AUTO_TEST_CASE(init_depends_on_name_and_seed_only) {
  std::vector<float> a(100), b(100), c(50), d(100);
  fill_normal(a.data(), 100, 0.0, 0.02, name_key("fc1.weight", 42));
  fill_normal(b.data(), 100, 0.0, 0.02, name_key("fc1.weight", 42));
  fill_normal(c.data(), 50, 0.0, 0.02, name_key("fc1.weight", 42));
  fill_normal(d.data(), 100, 0.0, 0.02, name_key("fc2.weight", 42));
  BOOST_TEST(a == b, boost::test_tools::per_element());
  BOOST_TEST(std::equal(c.begin(), c.end(), a.begin()));
  BOOST_TEST(a != d);
  double mean = 0, var = 0;
  std::vector<float> big(20000);
  fill_normal(big.data(), 20000, 1.0, 0.5, name_key("x", 1));
  for (float v : big) mean += v;
  mean /= 20000;
  for (float v : big) var += (v - mean) * (v - mean);
  var /= 20000;
  BOOST_TEST(std::abs(mean - 1.0) < 0.02);
  BOOST_TEST(std::abs(std::sqrt(var) - 0.5) < 0.02);
}

BOOST_AUTO_TEST_SUITE_END()
