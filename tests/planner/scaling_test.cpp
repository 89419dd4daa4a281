// How the planner's work grows with the model, measured without a clock (the timings are
// bench/scale.sh's): the heap allocations, counted, of building, printing, writing and
// reading plans of n and 2n layers. A plan grows linearly with its layers, so the
// allocations and bytes per layer must stay the same, within 5 %. Work sized by the whole
// model done once per phase or per op (a phased plan has 2n phases) makes the bytes per
// layer grow with n: the per-phase vectors of n layers the builder once zeroed made them
// grow 6 % from 200 to 400 layers, 16 % from 500 to 1,000 and 27 % from 1,000 to 2,000.
// A scan that allocates nothing (a lookup by name in a list) does not show here; the
// benchmark does.
#include <boost/test/unit_test.hpp>
#include <sstream>
#include <string>

#include "planner/build.h"
#include "planner/plan_json.h"
#include "planner/plan_text.h"
#include "tests/support/allocation_counter.h"
#include "tests/support/deep_model.h"

using namespace popkit;
using config::ExecutionMode;
using config::IoMode;
using test::AllocationCount;
using test::count_allocations;
using test::deep_model;

namespace {

// And twice as many. Plan files allocate a node per JSON value: fewer layers for them.
constexpr int kLayers = 300;
constexpr int kFileLayers = 100;

// The same model with its phases written out (the auto schedule): execution.phases.
config::Config explicit_phases(config::Config c) {
  const auto& layers = c.model.layers;
  const int n = static_cast<int>(layers.size());
  c.execution.phases_auto = false;
  for (int k = 0; k + 1 < n; ++k) c.execution.phases.push_back({{layers[k].name}});
  c.execution.phases.push_back(
      {{layers[n - 1].name}, {layers[n - 1].name, config::Pass::kBackward}});
  for (int k = n - 2; k >= 0; --k)
    c.execution.phases.push_back({{layers[k].name, config::Pass::kBackward}});
  return c;
}

// Allocations and bytes per layer of n and 2n layers agree within 5 %.
template <typename Fn>
void check_linear(const std::string& what, int n, Fn&& per_model) {
  const AllocationCount small = per_model(n);
  const AllocationCount large = per_model(2 * n);
  BOOST_TEST_CONTEXT(what << ": " << n << " layers: " << small.count << " allocations, "
                          << small.bytes << " bytes; " << 2 * n << " layers: " << large.count
                          << " allocations, " << large.bytes << " bytes") {
    BOOST_TEST(small.count > 0u);
    BOOST_TEST(static_cast<double>(large.count) <= 2.0 * 1.05 * static_cast<double>(small.count));
    BOOST_TEST(static_cast<double>(large.bytes) <= 2.0 * 1.05 * static_cast<double>(small.bytes));
  }
}

struct Case {
  const char* name;
  config::Config (*make)(int n_layers);
};

const Case kCases[] = {
    {"phased, io", [](int n) { return deep_model(n, ExecutionMode::kPhased); }},
    {"phased, io_overlapped",
     [](int n) { return deep_model(n, ExecutionMode::kPhased, IoMode::kIoOverlapped); }},
    {"phased, explicit phases",
     [](int n) { return explicit_phases(deep_model(n, ExecutionMode::kPhased)); }},
    {"standard, off-chip optimizer", [](int n) { return deep_model(n, ExecutionMode::kStandard); }},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(scaling)

BOOST_AUTO_TEST_CASE(build_plan_is_linear_in_layers) {
  for (const Case& c : kCases) {
    check_linear(fmt::format("build_plan, {}", c.name), kLayers, [&](int n) {
      const config::Config config = c.make(n);
      return count_allocations([&] { planner::build_plan(config); });
    });
  }
}

// The text and the files of the phased and the standard plan (explicit phases give the
// auto schedule's plan, io_overlapped adds a slot per streamed tensor).
const Case kFileCases[] = {kCases[0], kCases[3]};

BOOST_AUTO_TEST_CASE(plan_text_and_json_are_linear_in_layers) {
  for (const Case& c : kCases) {
    check_linear(fmt::format("print_plan, {}", c.name), kLayers, [&](int n) {
      const planner::Plan plan = planner::build_plan(c.make(n));
      std::ostringstream out;
      return count_allocations([&] { planner::print_plan(out, plan); });
    });
  }
  for (const Case& c : kFileCases) {
    check_linear(fmt::format("write_plan_json, {}", c.name), kFileLayers, [&](int n) {
      const planner::Plan plan = planner::build_plan(c.make(n));
      std::ostringstream out;
      return count_allocations([&] { planner::write_plan_json(out, plan); });
    });
  }
}

BOOST_AUTO_TEST_CASE(plan_file_reader_is_linear_in_layers) {
  for (const Case& c : kFileCases) {
    check_linear(fmt::format("plan_from_json, {}", c.name), kFileLayers, [&](int n) {
      const nlohmann::json json = planner::plan_to_json(planner::build_plan(c.make(n)));
      return count_allocations([&] { planner::plan_from_json(json, "plan.json"); });
    });
  }
}

BOOST_AUTO_TEST_SUITE_END()
