// A GPT (tests/data/gpt/gpt_small.yaml: two blocks with dropout, R 4, on small.txt beside
// it, 9 steps an epoch) interrupted and resumed ends on the uninterrupted run's
// checkpoint byte for byte, and evaluates alike: with a tied head in standard mode, and
// with an untied one phased (a tied head is refused there: config/validate_text.cpp),
// remote and sharded. Interrupted mid-epoch, at an epoch's end and just after it (each
// epoch shifts the text's windows).
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "helpers.h"

using namespace popkit;
using namespace popkit::runner;
using namespace popkit::runner::testing;

namespace {

constexpr std::int64_t kStepsPerEpoch = 9;  // 145 training windows, global batch 4 x 2 x 2
constexpr std::int64_t kSteps = kStepsPerEpoch + 3;

config::Config gpt_small(std::vector<std::string> overrides = {}) {
  const std::string dir = std::string(POPKIT_SOURCE_DIR) + "/tests/data/gpt";
  overrides.insert(overrides.begin(), "data.dir=" + dir);
  return load_test_config(dir + "/gpt_small.yaml", overrides);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpt_resume)

BOOST_AUTO_TEST_CASE(interrupted_and_resumed_ends_bitwise_identical) {
  struct Way {
    std::string name;
    std::vector<std::string> overrides;
  };
  const std::vector<Way> ways = {
      {"tied, standard", {}},
      {"untied, phased remote sharded",
       {"model.layers.4.tied_to=''", "execution.mode=phased", "remote.weights=true",
        "remote.optimizer_state=true", "sharding.enabled=true", "sharding.threshold=2048"}},
  };
  for (const Way& way : ways) {
    BOOST_TEST_CONTEXT(way.name) {
      const config::Config c = gpt_small(way.overrides);
      const auto dir = scratch("gpt_resume_" + std::to_string(&way - ways.data()));
      TrainOptions all;
      all.steps = kSteps;
      const TrainResult full = run(c, all, dir / "full");
      BOOST_REQUIRE(full.steps == kSteps);
      const auto want = file_bytes(full.checkpoint);
      for (const std::int64_t k : {std::int64_t{4}, kStepsPerEpoch, kStepsPerEpoch + 1}) {
        BOOST_TEST_CONTEXT("interrupted after " << k << " steps") {
          TrainOptions first = all;
          first.steps = k;
          const TrainResult part = run(c, first, dir / fmt::format("a{}", k));
          BOOST_TEST(part.steps == k);
          TrainOptions second = all;
          second.resume = part.checkpoint;
          const TrainResult rest = run(c, second, dir / fmt::format("b{}", k));
          BOOST_TEST(rest.steps == kSteps);
          BOOST_TEST((file_bytes(rest.checkpoint) == want));
          BOOST_REQUIRE(rest.test && full.test);
          BOOST_TEST(rest.test->loss == full.test->loss);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
