// How the engine's setup and its by-name variable access grow with the model, measured
// without a clock (the timings are bench/scale.sh's): the heap allocations, counted, of
// constructing the engine, initialising it, reading every variable by name as a
// checkpoint does, writing each back as a restore does, and evaluating, for n and 2n
// layers. All of it is linear in the layers, so allocations and bytes per layer must stay
// the same within 5 %: a copy of a model-sized structure per variable or per op (a list
// of names built per lookup, say) breaks that. A scan that allocates nothing does not
// show here; the benchmark does.
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "planner/build.h"
#include "planner/names.h"
#include "tests/support/allocation_counter.h"
#include "tests/support/deep_model.h"

using namespace popkit;
using test::AllocationCount;
using test::count_allocations;

namespace {

constexpr int kLayers = 150;  // and twice as many

// One thread: the counter sees the calling thread's allocations only.
engine::EngineOptions one_thread() {
  engine::EngineOptions o;
  o.n_threads = 1;
  return o;
}

AllocationCount engine_work(int n_layers, config::ExecutionMode mode) {
  const config::Config config = test::deep_model(n_layers, mode);
  const planner::Plan plan = planner::build_plan(config);
  const planner::Plan eval_plan = planner::build_plan(config, planner::Program::kEval);
  const engine::Dataset data =
      engine::make_synthetic(8, 4, 4, 7, 0.3, 0, 4);  // the model's 4 classes
  return count_allocations([&] {
    engine::Engine engine(plan, one_thread());
    engine.initialize();
    for (const std::string& name : engine.variable_names()) {
      const std::vector<std::vector<float>> values = engine.retrieve_variable(name);
      engine.write_variable(name, 0, values.front());
    }
    engine::Engine evaluator(eval_plan, one_thread());
    engine::copy_weights(engine, evaluator);
    BOOST_TEST(evaluator.evaluate(data).n == data.n);
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scaling)

BOOST_AUTO_TEST_CASE(setup_and_variable_access_are_linear_in_layers) {
  for (const auto mode : {config::ExecutionMode::kPhased, config::ExecutionMode::kStandard}) {
    const AllocationCount small = engine_work(kLayers, mode);
    const AllocationCount large = engine_work(2 * kLayers, mode);
    BOOST_TEST_CONTEXT(popkit::enum_name(mode)
                       << ": " << kLayers << " layers: " << small.count << " allocations, "
                       << small.bytes << " bytes; " << 2 * kLayers << " layers: " << large.count
                       << " allocations, " << large.bytes << " bytes") {
      BOOST_TEST(small.count > 0u);
      BOOST_TEST(static_cast<double>(large.count) <= 2.0 * 1.05 * static_cast<double>(small.count));
      BOOST_TEST(static_cast<double>(large.bytes) <= 2.0 * 1.05 * static_cast<double>(small.bytes));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
