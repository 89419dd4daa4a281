// Inverted dropout's mask: the fraction kept, the exact scale, and a mask that follows
// only (seed, optimizer step, sample index in the global batch, layer).
#include "engine/tensor/dropout.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <vector>

using namespace popkit::engine;

namespace {

constexpr std::int64_t kWidth = 64;

std::vector<float> ones(std::int64_t n) {
  return std::vector<float>(static_cast<std::size_t>(n), 1.0f);
}

// The rows' output for an input of ones: 0 or 1 / (1 - rate) per element.
std::vector<float> mask(std::int64_t rows, double rate, std::uint64_t seed, std::int64_t step,
                        std::int64_t first_sample, std::int64_t layer) {
  const auto x = ones(rows * kWidth);
  std::vector<float> y(x.size());
  dropout_rows(x.data(), y.data(), rows, kWidth, rate, seed, step, first_sample, layer);
  return y;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dropout)

BOOST_AUTO_TEST_CASE(keeps_one_minus_rate_scaled_by_its_inverse) {
  // 4096 x 64 = 262,144 draws: the kept fraction's standard deviation is ~0.0009.
  for (const double rate : {0.1, 0.5, 0.9}) {
    const auto y = mask(4096, rate, 42, 1, 0, 3);
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    std::int64_t kept = 0;
    for (float v : y) {
      BOOST_TEST((v == 0.0f || v == scale));
      kept += v != 0.0f;
    }
    const double fraction = static_cast<double>(kept) / static_cast<double>(y.size());
    BOOST_TEST(std::abs(fraction - (1.0 - rate)) < 0.005, "rate " << rate << ": kept " << fraction);
  }
}

BOOST_AUTO_TEST_CASE(rate_zero_is_the_identity) {
  std::vector<float> x{1.5f, -2.0f, 0.25f, 3.0f};
  std::vector<float> y(x.size());
  dropout_rows(x.data(), y.data(), 2, 2, 0.0, 7, 5, 10, 1);
  BOOST_TEST(y == x, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_sample_mask_follows_its_key_only) {
  // Row i of a micro-batch starting at sample 8 is sample 8 + i: the same mask as row
  // 0 of a micro-batch starting there, whichever replica or step holds it.
  const auto batch = mask(4, 0.5, 42, 3, 8, 2);
  const auto single = mask(1, 0.5, 42, 3, 10, 2);
  BOOST_TEST(std::memcmp(batch.data() + 2 * kWidth, single.data(), kWidth * sizeof(float)) == 0);
  // Any other part of the key gives another mask.
  const auto base = mask(1, 0.5, 42, 3, 10, 2);
  for (const auto& other : {mask(1, 0.5, 43, 3, 10, 2), mask(1, 0.5, 42, 4, 10, 2),
                            mask(1, 0.5, 42, 3, 11, 2), mask(1, 0.5, 42, 3, 10, 1)})
    BOOST_TEST(other != base);
}

BOOST_AUTO_TEST_CASE(backward_applies_the_forward_mask) {
  // dx = dy * mask / (1 - rate): zero exactly where the forward output was zero.
  std::vector<float> x(3 * kWidth), dy(3 * kWidth);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = 1.0f + static_cast<float>(i);
    dy[i] = 0.5f - static_cast<float>(i);
  }
  std::vector<float> y(x.size()), dx(x.size());
  dropout_rows(x.data(), y.data(), 3, kWidth, 0.3, 1, 2, 6, 0);
  dropout_rows(dy.data(), dx.data(), 3, kWidth, 0.3, 1, 2, 6, 0);
  const float scale = static_cast<float>(1.0 / 0.7);
  for (std::size_t i = 0; i < x.size(); ++i) {
    BOOST_TEST((y[i] == 0.0f) == (dx[i] == 0.0f));
    if (y[i] != 0.0f) {
      BOOST_TEST(y[i] == x[i] * scale);
      BOOST_TEST(dx[i] == dy[i] * scale);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
