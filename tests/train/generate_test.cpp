// poprun generate's sampling (runner/generate.h) against the evaluation it samples from:
// greedy generation's byte is the one the evaluation plan scores as its prediction for
// the prompt's next byte, found through evaluate()'s correct count, not through the logits
// generation reads.
#include "runner/generate.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "runner/run_setup.h"
#include "tests/train/helpers.h"

namespace popkit::runner::testing {
namespace {

config::Config gpt_tiny() {
  const std::string path = std::string(POPKIT_SOURCE_DIR) + "/tests/data/gpt/gpt_tiny.yaml";
  auto result = config::load_config_file(path, {});
  BOOST_REQUIRE(result.config);
  return *result.config;
}

// How many of the window's positions evaluate() finds predicted when the targets are 0
// but at position `last`, whose target is `label`. The window is built here, not by
// generation_window: the context's last T bytes first, zeros after.
std::int64_t correct_with(engine::Engine& eval, const std::string& context, std::int64_t last,
                          std::uint8_t label) {
  const std::int64_t t = eval.plan().positions;
  engine::Dataset d;
  d.name = "window";
  d.n = 1;
  d.rows = t;
  d.cols = 1;
  d.label_width = t;
  d.images.assign(static_cast<std::size_t>(t), 0);
  d.labels.assign(static_cast<std::size_t>(t), 0);
  const std::size_t skip = context.size() > static_cast<std::size_t>(t) ? context.size() - t : 0;
  for (std::size_t i = skip; i < context.size(); ++i)
    d.images[i - skip] = static_cast<std::uint8_t>(context[i]);
  d.labels[static_cast<std::size_t>(last)] = label;
  return eval.evaluate(d).correct;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(generate)

BOOST_AUTO_TEST_CASE(greedy_byte_is_the_evaluations_prediction) {
  const config::Config config = gpt_tiny();
  engine::Engine eval(plan_of(config, planner::Program::kEval), engine_options(config, 0));
  eval.initialize();
  // Weights far from the initial 0.02 std, so that the logits differ by more than rounding.
  for (const std::string& name : eval.variable_names()) {
    std::vector<float> v = eval.read_variable(name);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] += 0.3F * static_cast<float>(
                         std::sin(0.7 * static_cast<double>(i) + static_cast<double>(name.size())));
    eval.write_variable(name, v);
  }
  const std::int64_t t = eval.plan().positions;
  std::string longer;
  for (std::int64_t i = 0; i < t + 37; ++i) longer.push_back(static_cast<char>('a' + i % 23));
  for (const std::string& prompt : {std::string("Hello, w"), std::string("Q"), longer}) {
    const std::string out = generate_bytes(eval, prompt, 1, Sampling{0.0, 7});
    BOOST_REQUIRE_EQUAL(out.size(), 1U);
    const auto greedy = static_cast<std::uint8_t>(out[0]);
    const std::int64_t last =
        std::min<std::int64_t>(static_cast<std::int64_t>(prompt.size()), t) - 1;
    const auto other = static_cast<std::uint8_t>(greedy + 1);
    // One position's target changes: the count drops by one exactly when that position's
    // largest logit is the greedy byte's.
    BOOST_TEST(
        correct_with(eval, prompt, last, greedy) - correct_with(eval, prompt, last, other) == 1,
        "prompt of " << prompt.size() << " bytes, greedy byte " << int{greedy});
    // The greedy byte ignores the seed; another temperature samples with it.
    BOOST_TEST(generate_bytes(eval, prompt, 1, Sampling{0.0, 99}) == out);
  }
}

BOOST_AUTO_TEST_CASE(sampling_follows_the_tempered_softmax) {
  // p = softmax({0, ln 3}) = {1/4, 3/4} at T 1; at T 2, {1/(1 + sqrt 3), ...} = {0.366, 0.634}.
  const std::vector<float> logits = {0.0F, static_cast<float>(std::log(3.0))};
  BOOST_TEST(sample_byte(logits, 1.0, 0.24) == 0);
  BOOST_TEST(sample_byte(logits, 1.0, 0.26) == 1);
  BOOST_TEST(sample_byte(logits, 2.0, 0.36) == 0);
  BOOST_TEST(sample_byte(logits, 2.0, 0.37) == 1);
  BOOST_TEST(sample_byte(logits, 0.0, 0.0) == 1);
  BOOST_TEST(escape_bytes(std::string("a\x01\\\n\xff", 5)) == "a\\x01\\\\\n\\xff");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace popkit::runner::testing
