// A small GPT (embedding, two decoder blocks with dropout, a final layer norm, a head tied
// to the embedding) run by the engine from real plans on byte-level text: it learns,
// every tensor it allocates is the plan's to the byte (per phase, replica and class),
// nothing reads a tensor before writing it, and evaluation scores every position.
#include <array>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "engine/data/text_dataset.h"
#include "engine/engine.h"
#include "planner/build.h"
#include "tests/engine/fox_text.h"
#include "tests/engine/training.h"
#include "tests/planner/configs.h"

using namespace popkit;
using engine::Engine;
using engine::test::options;

namespace {

constexpr std::int64_t kSeq = engine::test::kFoxSequence;
using engine::test::fox_corpus;
using engine::test::fox_train_set;
using engine::test::fox_validation_set;

// Nats a byte of a model that knows only the bytes' frequencies.
double unigram_entropy(const engine::TextCorpus& c) {
  std::array<double, 256> count{};
  for (const std::uint8_t b : c.bytes) count[b] += 1;
  double h = 0;
  for (const double n : count)
    if (n > 0)
      h -= n / static_cast<double>(c.bytes.size()) *
           std::log(n / static_cast<double>(c.bytes.size()));
  return h;
}

config::Config gpt_config() {
  config::Config c = planner::test::gpt({.vocabulary = 256,
                                         .positions = kSeq,
                                         .width = 32,
                                         .blocks = 2,
                                         .heads = 4,
                                         .sequence = kSeq});
  for (config::Layer& l : c.model.layers)
    if (l.type == "decoder_block") {
      l.attributes.set("attention_dropout", 0.1);
      l.attributes.set("residual_dropout", 0.1);
    }
  c.training.micro_batch_size = 4;
  c.training.gradient_accumulation = 2;
  c.training.optimizer.lr = 1e-2;
  return c;
}

// `steps` optimizer steps over consecutive global batches; the losses.
std::vector<double> train(Engine& e, std::int64_t steps) {
  return engine::test::train_on(e, fox_train_set(), steps);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpt_run)

// From ln 256 = 5.55 nats a byte to well under the text's unigram entropy (2.95: what a
// model that ignores the context reaches) in 150 steps; the validation split, scored a
// position a row, agrees.
BOOST_AUTO_TEST_CASE(it_learns_the_text_and_evaluates_every_position) {
  const config::Config c = gpt_config();
  Engine e(planner::build_plan(c), options());
  e.initialize();
  const std::vector<double> losses = train(e, 150);
  const double unigram = unigram_entropy(fox_corpus());
  BOOST_TEST(losses.front() > 5.0);
  BOOST_TEST(std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10 < unigram - 0.3);
  Engine eval(planner::build_plan(c, planner::Program::kEval), options());
  engine::copy_weights(e, eval);
  const engine::EvalResult r = eval.evaluate(fox_validation_set());
  BOOST_TEST(r.n == fox_validation_set().n);
  BOOST_TEST(r.rows == fox_validation_set().n * kSeq);
  BOOST_TEST(r.loss < unigram - 0.3);
}

BOOST_AUTO_TEST_CASE(measured_memory_equals_planned_and_nothing_reads_unwritten_bytes) {
  const config::Config c = gpt_config();
  const planner::Plan plan = planner::build_plan(c);
  Engine clean(plan, options());
  clean.initialize();
  engine::EngineOptions poisoned = options();
  poisoned.poison_new_tensors = true;
  Engine e(plan, poisoned);
  e.initialize();
  const std::vector<double> a = train(e, 3), b = train(clean, 3);
  BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
  const auto report = e.memory_report();
  BOOST_REQUIRE_EQUAL(report.phases.size(), plan.phases.size());
  for (std::size_t p = 0; p < plan.phases.size(); ++p)
    BOOST_TEST_CONTEXT("phase '" << plan.phases[p].name << "'") {
      const auto& want = plan.phases[p].memory;
      const auto& got = report.phases[p][0];
      BOOST_TEST(got.peak == want.peak);
      BOOST_TEST(got.always_live == want.always_live);
      BOOST_TEST(got.not_always_live == want.not_always_live);
      BOOST_TEST(got.peak_by_class == want.peak_by_class, boost::test_tools::per_element());
    }
  BOOST_TEST(report.peak_bytes[0] == plan.peak_bytes);
  BOOST_TEST(report.always_live_bytes[0] == plan.always_live_bytes);
}

BOOST_AUTO_TEST_SUITE_END()
