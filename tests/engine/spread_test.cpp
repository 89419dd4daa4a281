// One replica with the threads spreads its ops over the pool: the GEMMs in column blocks
// (a linear's forward and input gradient in row tiles of them too), the element-wise passes (the
// activations' backward, the running mean's division, the optimizer's step) in element blocks
// (planner/element_blocks.h). The blocks depend on the shapes only, so a lone replica trains to the
// same bits on any number of threads.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <vector>

#include "config/layer_kinds.h"
#include "engine/engine.h"
#include "planner/build.h"
#include "planner/element_blocks.h"
#include "planner/schedule.h"
#include "planner/workspace.h"
#include "tests/engine/mode_variants.h"
#include "tests/engine/training.h"
#include "tests/support/test_profile.h"

using namespace popkit;

namespace {

constexpr std::int64_t kSide = 6;    // 36 inputs
constexpr std::int64_t kRows = 520;  // the micro-batch

// One replica, micro-batch 520 and accumulation 2 (so the running mean divides), 36 ->
// 2048 -> 256 -> 300 -> 10: fc1 runs 16 column blocks (73,728 weights: 3 element blocks
// for the optimizer); fc2 and fc3 run 4 row tiles of 128 rows (the last 136), fc3's
// 76,800 weights 3 element blocks, its activation's backward 156,000 elements 5 blocks.
config::Config lone_replica(const config::Optimizer& optimizer) {
  config::Config c;
  c.name = "spread-test";
  c.model.input_shape = {kSide, kSide};
  using config::make_layer;
  c.model.layers = {make_layer("fc1", "linear", {{"out_features", 2048}, {"activation", "gelu"}}),
                    make_layer("fc2", "linear", {{"out_features", 256}, {"activation", "relu"}}),
                    make_layer("fc3", "linear", {{"out_features", 300}, {"activation", "gelu"}}),
                    make_layer("fc4", "linear", {{"out_features", 10}})};
  c.model.init.weights_std = 0.05;
  engine::test::replicate(c, 1, kRows, 2);
  c.training.optimizer = optimizer;
  c.data.dataset = config::Dataset::kSynthetic;
  return test_support::with_test_profile(c);
}

std::vector<std::vector<float>> trained(const config::Config& c, int threads) {
  engine::EngineOptions o;
  o.n_threads = threads;
  engine::Engine e(planner::build_plan(c), o);
  e.initialize();
  static const engine::Dataset data = engine::make_synthetic(2200, kSide, kSide, 7, 0.3);
  engine::test::train_on(e, data, 3);
  return engine::test::all_state(e);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(equivalence)

BOOST_AUTO_TEST_CASE(a_lone_replica_trains_to_the_same_bits_on_any_number_of_threads) {
  BOOST_TEST_REQUIRE(planner::element_blocks(kSide * kSide * 2048).n == 3);
  BOOST_TEST_REQUIRE(planner::gemm_tiles(kRows, kSide * kSide, 2048).n == 16);
  BOOST_TEST_REQUIRE(planner::gemm_tiles(kRows, 2048, 256).row_tiles == 4);  // fc2 forward
  BOOST_TEST_REQUIRE(planner::gemm_tiles(kRows, 300, 256).row_tiles == 4);   // fc3 input grad
  BOOST_TEST_REQUIRE(planner::element_blocks(256 * 300).n == 3);
  BOOST_TEST_REQUIRE(planner::element_blocks(kRows * 300).n == 5);
  config::Optimizer adam;
  adam.lr = 1e-2;
  adam.weight_decay = 1e-3;
  for (const engine::test::OptimizerCase& opt : engine::test::optimizer_cases(adam)) {
    const config::Config c = lone_replica(opt.optimizer);
    const auto one = trained(c, 1);
    for (const int threads : {2, 3}) {
      BOOST_TEST_INFO(opt.name << " on " << threads << " threads");
      BOOST_TEST(engine::test::bitwise_equal(trained(c, threads), one));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
