// Every example loads without errors or warnings, and the explicit-phases example
// writes out exactly the schedule of `phases: auto` (DESIGN.md, "The plan").
#include <boost/test/unit_test.hpp>
#include <filesystem>

#include "tests/config/helpers.h"

using namespace popkit::config;
using namespace popkit::config::test;
namespace fs = std::filesystem;

namespace {

const std::string kExamples = POPKIT_SOURCE_DIR "/examples";

// phases: auto — a forward phase per layer but the last; the last layer's forward and
// backward together; a backward phase per layer in reverse.
std::vector<std::vector<PhaseItem>> auto_phases(const std::vector<Layer>& layers) {
  std::vector<std::vector<PhaseItem>> phases;
  for (std::size_t i = 0; i + 1 < layers.size(); ++i) {
    phases.push_back({{layers[i].name, Pass::kForward}});
  }
  phases.push_back({{layers.back().name, Pass::kForward}, {layers.back().name, Pass::kBackward}});
  for (std::size_t i = layers.size() - 1; i-- > 0;) {
    phases.push_back({{layers[i].name, Pass::kBackward}});
  }
  return phases;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(examples)

BOOST_AUTO_TEST_CASE(every_example_is_valid_without_warnings) {
  std::size_t n_examples = 0;
  for (const auto& entry : fs::directory_iterator(kExamples)) {
    if (entry.path().extension() != ".yaml") continue;
    ++n_examples;
    const auto result = load_config_file(entry.path().string());
    BOOST_TEST(result.ok(), entry.path().filename() << ":\n" << text(result));
    BOOST_TEST(result.diagnostics.empty(), entry.path().filename() << ":\n" << text(result));
  }
  BOOST_TEST(n_examples >= 6u);
}

BOOST_AUTO_TEST_CASE(explicit_phases_example_is_the_auto_schedule) {
  const auto explicit_ = load_config_file(kExamples + "/mnist_explicit_phases.yaml");
  const auto automatic = load_config_file(kExamples + "/mnist.yaml");
  BOOST_REQUIRE(explicit_.ok());
  BOOST_REQUIRE(automatic.ok());
  BOOST_TEST(automatic.config->execution.phases_auto);
  const auto& phases = explicit_.config->execution.phases;
  const auto expected = auto_phases(automatic.config->model.layers);
  BOOST_REQUIRE(phases.size() == expected.size());
  for (std::size_t p = 0; p < phases.size(); ++p) {
    BOOST_REQUIRE(phases[p].size() == expected[p].size());
    for (std::size_t i = 0; i < phases[p].size(); ++i) {
      BOOST_TEST(phases[p][i].layer == expected[p][i].layer);
      BOOST_TEST((phases[p][i].pass == expected[p][i].pass));
    }
  }
}

BOOST_AUTO_TEST_CASE(mnist_is_the_phased_example_of_the_design) {
  const auto result = load_config_file(kExamples + "/mnist.yaml");
  BOOST_REQUIRE(result.ok());
  const Config& c = *result.config;
  BOOST_TEST(c.replication.factor == 2);
  BOOST_TEST(c.training.micro_batch_size == 8);
  BOOST_TEST(c.training.gradient_accumulation == 4);
  BOOST_TEST(c.sharding.enabled);
  BOOST_TEST(c.sharding.threshold == 512);
  BOOST_TEST(c.remote.weights);
  BOOST_TEST(c.remote.optimizer_state);
  BOOST_TEST((c.execution.mode == ExecutionMode::kPhased));
  BOOST_TEST((c.execution.io_mode == IoMode::kIo));
  BOOST_TEST(c.execution.io_tiles == 32);
  BOOST_TEST(c.training.epochs.value() == 6);
  BOOST_TEST(c.training.optimizer.lr == 3.0e-4);
  BOOST_TEST(c.device.memory_per_replica == 900u * 1024 * 1024);
}

BOOST_AUTO_TEST_SUITE_END()
