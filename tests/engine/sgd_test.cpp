// SGD (torch.optim.SGD semantics, dampening 0) on few-element problems with closed-form
// answers; the values are exact in float, so the checks are exact.
#include "engine/tensor/sgd.h"

#include <boost/test/unit_test.hpp>
#include <vector>

#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"

using namespace popkit::engine;

namespace {

SgdParams params(double lr, double momentum, double wd, bool nesterov) {
  popkit::config::Optimizer o =
      popkit::config::make_optimizer("sgd", {{"momentum", momentum}, {"nesterov", nesterov}});
  o.lr = lr;
  o.weight_decay = wd;
  return SgdParams::from(o);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sgd)

BOOST_AUTO_TEST_CASE(plain_step_is_w_minus_lr_g) {
  std::vector<float> w{1.0f, -2.0f}, g{1.0f, 0.25f};
  sgd_step(w.data(), g.data(), nullptr, 2, params(0.5, 0.0, 0.0, false));
  BOOST_TEST(w[0] == 0.5f);
  BOOST_TEST(w[1] == -2.125f);
}

BOOST_AUTO_TEST_CASE(weight_decay_is_added_to_the_gradient) {
  // d = g + wd w = 1 + 0.5 = 1.5;  w = 1 - 0.5 * 1.5 = 0.25.
  std::vector<float> w{1.0f}, g{1.0f};
  sgd_step(w.data(), g.data(), nullptr, 1, params(0.5, 0.0, 0.5, false));
  BOOST_TEST(w[0] == 0.25f);
}

BOOST_AUTO_TEST_CASE(momentum_buffer_starts_as_the_gradient) {
  // mu 0.5, g = 1 twice: b = 1, w = 0.5; then b = 0.5 + 1 = 1.5, w = 0.5 - 0.75 = -0.25.
  // The first step equals torch's, whose buffer starts as a copy of the gradient.
  std::vector<float> w{1.0f}, g{1.0f}, b{0.0f};
  const auto p = params(0.5, 0.5, 0.0, false);
  sgd_step(w.data(), g.data(), b.data(), 1, p);
  BOOST_TEST(b[0] == 1.0f);
  BOOST_TEST(w[0] == 0.5f);
  sgd_step(w.data(), g.data(), b.data(), 1, p);
  BOOST_TEST(b[0] == 1.5f);
  BOOST_TEST(w[0] == -0.25f);
}

BOOST_AUTO_TEST_CASE(nesterov_looks_ahead) {
  // mu 0.5, g = 1 twice: b = 1, w = 1 - 0.5 (1 + 0.5) = 0.25; then b = 1.5,
  // w = 0.25 - 0.5 (1 + 0.75) = -0.625.
  std::vector<float> w{1.0f}, g{1.0f}, b{0.0f};
  const auto p = params(0.5, 0.5, 0.0, true);
  sgd_step(w.data(), g.data(), b.data(), 1, p);
  BOOST_TEST(w[0] == 0.25f);
  sgd_step(w.data(), g.data(), b.data(), 1, p);
  BOOST_TEST(b[0] == 1.5f);
  BOOST_TEST(w[0] == -0.625f);
}

BOOST_AUTO_TEST_CASE(momentum_with_weight_decay) {
  // wd 0.5, mu 0.5, lr 0.5, w = 1, g = 1: d = 1.5, b = 1.5, w = 0.25; then
  // d = 1 + 0.125 = 1.125, b = 0.75 + 1.125 = 1.875, w = 0.25 - 0.9375 = -0.6875.
  std::vector<float> w{1.0f}, g{1.0f}, b{0.0f};
  const auto p = params(0.5, 0.5, 0.5, false);
  sgd_step(w.data(), g.data(), b.data(), 1, p);
  BOOST_TEST(w[0] == 0.25f);
  sgd_step(w.data(), g.data(), b.data(), 1, p);
  BOOST_TEST(b[0] == 1.875f);
  BOOST_TEST(w[0] == -0.6875f);
}

BOOST_AUTO_TEST_SUITE_END()
