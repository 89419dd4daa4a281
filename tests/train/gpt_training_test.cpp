// A GPT (tests/data/gpt/gpt_small.yaml: two blocks with dropout, R 4, on small.txt beside
// it, 9 steps an epoch) interrupted and resumed ends on the uninterrupted run's
// checkpoint byte for byte, and evaluates alike: with a tied head in standard mode, and
// with an untied one phased (a tied head is refused there: config/validate_text.cpp),
// remote and sharded. Interrupted mid-epoch, at an epoch's end and just after it (each
// epoch shifts the text's windows). And one replica of micro-batch 8 trains as four of 2
// through the runner's text batches, to rounding.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
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

BOOST_AUTO_TEST_SUITE(gpt_training)

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

// One replica of micro-batch 8 reads the windows four replicas of 2 read, epoch after
// epoch (TextBatches' [A, R, B, T] layout and each epoch's shift): after 12 steps across
// an epoch's end both stand at the same data position, and every F32 tensor (weights and
// Adam's moments) agrees to rounding: within 1e-5 of its largest magnitude (measured:
// 1.6e-6), not bitwise.
BOOST_AUTO_TEST_CASE(one_replica_of_eight_trains_as_four_of_two) {
  const auto dir = scratch("gpt_replicas");
  TrainOptions all;
  all.steps = kSteps;
  const TrainResult four = run(gpt_small(), all, dir / "four");
  const TrainResult one =
      run(gpt_small({"replication.factor=1", "replication.groupings.everyone.group_size=1",
                     "training.micro_batch_size=8"}),
          all, dir / "one");
  const auto a = engine::read_safetensors(one.checkpoint);
  const auto b = engine::read_safetensors(four.checkpoint);
  BOOST_TEST(a.metadata.at("data_position") == b.metadata.at("data_position"));
  BOOST_TEST(a.metadata.at("epoch") == b.metadata.at("epoch"));
  BOOST_REQUIRE(a.tensors.size() == b.tensors.size());
  double worst = 0;
  bool bitwise = true;
  for (const auto& [name, t] : b.tensors) {
    if (t.dtype != "F32") continue;
    const auto& other = a.tensors.at(name).data;
    BOOST_REQUIRE(other.size() == t.data.size());
    bitwise = bitwise && other == t.data;
    std::vector<float> x(t.data.size() / 4), y(x.size());
    std::memcpy(x.data(), other.data(), other.size());
    std::memcpy(y.data(), t.data.data(), t.data.size());
    double scale = 0;
    for (const float v : y) scale = std::max(scale, double{std::abs(v)});
    for (std::size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, std::abs(double{x[i]} - y[i]) / std::max(scale, 1e-30));
  }
  BOOST_TEST_MESSAGE("largest difference relative to the tensor's scale: " << worst);
  BOOST_TEST(worst < 1e-5);
  BOOST_TEST(!bitwise);
}

BOOST_AUTO_TEST_SUITE_END()
