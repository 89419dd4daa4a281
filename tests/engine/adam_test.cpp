// Adam (popxl-addons semantics) on one- and few-element problems with closed-form answers.
#include <Eigen/Core>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "engine/tensor/adam_step.h"

using namespace popkit::engine;

namespace {

AdamParams params(double lr, double eps, double wd, bool bias_correction) {
  popkit::config::Optimizer o;
  o.lr = lr;
  o.attributes.set("eps", eps);
  o.weight_decay = wd;
  o.attributes.set("bias_correction", bias_correction);
  return AdamParams::from(o);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(adam)

BOOST_AUTO_TEST_CASE(first_step_with_bias_correction_is_sign_step) {
  // t = 1: m^ = g, v^ = g^2, u = g / |g| (eps = 0): w -= lr * sign(g), exactly.
  auto p = params(0.1, 1e-5, 0.0, true);
  p.eps = 0.0f;
  std::vector<float> w{1.0f, 1.0f}, g{2.0f, -0.5f}, m{0, 0}, v{0, 0};
  adam_step(w.data(), g.data(), m.data(), v.data(), 2, 1, p);
  BOOST_TEST(w[0] == 1.0f - 0.1f);
  BOOST_TEST(w[1] == 1.0f + 0.1f);
  BOOST_TEST(m[0] == 0.1f * 2.0f);                              // (1 - b1) g
  BOOST_TEST(v[1] == static_cast<float>(1.0 - 0.999) * 0.25f);  // (1 - b2) g^2
}

BOOST_AUTO_TEST_CASE(without_bias_correction) {
  // t = 1, no correction: u = (1-b1) g / (sqrt((1-b2) g^2) + eps).
  const auto p = params(0.01, 1e-5, 0.0, false);
  std::vector<float> w{0.5f}, g{3.0f}, m{0}, v{0};
  adam_step(w.data(), g.data(), m.data(), v.data(), 1, 1, p);
  const double u = 0.1 * 3.0 / (std::sqrt(0.001 * 9.0) + 1e-5);
  BOOST_TEST(std::abs(w[0] - (0.5 - 0.01 * u)) < 1e-6);
}

BOOST_AUTO_TEST_CASE(constant_gradient_with_bias_correction) {
  // With a constant g the corrected moments equal g and g^2 at every t: each step moves
  // w by lr * g / (|g| + eps).
  const auto p = params(0.01, 1e-5, 0.0, true);
  std::vector<float> w{0.0f}, g{0.25f}, m{0}, v{0};
  for (std::int64_t t = 1; t <= 5; ++t) adam_step(w.data(), g.data(), m.data(), v.data(), 1, t, p);
  BOOST_TEST(std::abs(w[0] - (-5 * 0.01 * 0.25 / (0.25 + 1e-5))) < 1e-6);
}

BOOST_AUTO_TEST_CASE(weight_decay_alone) {
  // g = 0: u = wd w, w -= lr wd w: 2 - 0.5 * 0.5 * 2 = 1.5.
  const auto p = params(0.5, 1e-5, 0.5, false);
  std::vector<float> w{2.0f}, g{0.0f}, m{0}, v{0};
  adam_step(w.data(), g.data(), m.data(), v.data(), 1, 1, p);
  BOOST_TEST(w[0] == 1.5f);
}

BOOST_AUTO_TEST_CASE(float16_first_moment_uses_the_rounded_value) {
  auto p = params(0.1, 1e-5, 0.0, true);
  p.eps = 0.0f;
  std::vector<float> w{1.0f}, g{1.0f / 3.0f}, v{0};
  std::vector<Eigen::half> m{Eigen::half(0.0f)};
  adam_step(w.data(), g.data(), m.data(), v.data(), 1, 1, p);
  const Eigen::half m_expected(0.1f * (1.0f / 3.0f));
  BOOST_TEST(static_cast<float>(m[0]) == static_cast<float>(m_expected));
  const float m_hat = static_cast<float>(m_expected) / 0.1f;
  const float v_hat = (p.one_minus_beta2 * (g[0] * g[0])) / p.one_minus_beta2;
  BOOST_TEST(w[0] == 1.0f - 0.1f * (m_hat / std::sqrt(v_hat)));
  BOOST_TEST(w[0] != 0.9f);  // the half rounding shows
}

BOOST_AUTO_TEST_CASE(padding_stays_zero) {
  // A shard's zero padding (g = m = v = w = 0) never moves.
  const auto p = params(0.1, 1e-5, 0.1, true);
  std::vector<float> w{0.0f}, g{0.0f}, m{0}, v{0};
  for (std::int64_t t = 1; t <= 3; ++t) adam_step(w.data(), g.data(), m.data(), v.data(), 1, t, p);
  BOOST_TEST(w[0] == 0.0f);
  BOOST_TEST(m[0] == 0.0f);
  BOOST_TEST(v[0] == 0.0f);
}

BOOST_AUTO_TEST_SUITE_END()
