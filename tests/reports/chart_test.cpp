// The SVG charts: nice ticks, text fitted to the width, units that do not mix devices,
// each verb's chart its own, and golden SVGs of each (tests/reports/chart_render_test.sh
// renders them with rsvg-convert).
#include "reports/chart.h"

#include <boost/test/unit_test.hpp>
#include <sstream>

#include "reports/svg.h"
#include "tests/reports/golden.h"

namespace r = popkit::reports;
namespace svg = popkit::reports::svg;
using r::testing::fixtures;
namespace tt = boost::test_tools;

namespace {

std::string render(const std::vector<std::string>& files, r::ChartKind kind,
                   const std::vector<std::string>& names = {}) {
  std::ostringstream out;
  r::write_chart(fixtures(files), kind, out, names);
  return out.str();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chart)

BOOST_AUTO_TEST_CASE(ticks_are_nice_and_four_to_six) {
  BOOST_TEST(svg::nice_ticks(0, 7.3) == std::vector<double>({0, 2, 4, 6, 8}), tt::per_element());
  BOOST_TEST(svg::nice_ticks(0, 10) == std::vector<double>({0, 2, 4, 6, 8, 10}), tt::per_element());
  BOOST_TEST(svg::nice_ticks(0, 0.3) == std::vector<double>({0, 0.1, 0.2, 0.3}), tt::per_element());
  BOOST_TEST(svg::nice_ticks(-0.5, 2.3) == std::vector<double>({-1, 0, 1, 2, 3}),
             tt::per_element());
  for (const double hi : {0.37, 1.0, 3.0, 13.0, 99.0, 640.0, 1549.0, 16500.0, 1.0e9}) {
    const auto ticks = svg::nice_ticks(0, hi);
    BOOST_TEST(ticks.size() >= 4u, hi);
    BOOST_TEST(ticks.size() <= 6u, hi);
    BOOST_TEST(ticks.back() >= hi, hi);
  }
  BOOST_TEST(svg::nice_ticks(0, 0).size() >= 2u);  // an empty range still has an axis
}

BOOST_AUTO_TEST_CASE(units_follow_the_largest_value) {
  BOOST_TEST(svg::bytes_unit(1000).name == "B");
  BOOST_TEST(svg::bytes_unit(16.12 * 1024).name == "KiB");
  BOOST_TEST(svg::bytes_unit(3.0 * 1024 * 1024).name == "MiB");
  BOOST_TEST(svg::seconds_unit(0.1).name == "ms");
  BOOST_TEST(svg::seconds_unit(0.0008).name == "\u00b5s");
  BOOST_TEST(svg::seconds_unit(2.0).name == "s");
}

BOOST_AUTO_TEST_CASE(long_text_is_cut_to_fit) {
  const std::string title(200, 'x');
  const std::string fitted = svg::fit(title, 400, 14);
  BOOST_TEST(svg::text_width(fitted, 14) <= 400.0);
  BOOST_TEST(fitted.substr(fitted.size() - 3) == "...");
  BOOST_TEST(svg::fit("short", 400, 14) == "short");
  // A title longer than the page is cut, not clipped by the renderer.
  const std::string svg_text =
      render({"base.json"}, r::ChartKind::kMemory, {std::string(300, 'n')});
  BOOST_TEST(svg_text.find(std::string(300, 'n')) == std::string::npos);
  BOOST_TEST(svg_text.find("nnn...</text>") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(each_verb_draws_its_own_chart) {
  const std::string memory = render({"base.json"}, r::ChartKind::kMemory);
  const std::string throughput = render({"base.json"}, r::ChartKind::kThroughput);
  BOOST_TEST(memory != throughput);
  BOOST_TEST(memory.find("memory per replica (MiB)") != std::string::npos);
  BOOST_TEST(throughput.find("time per step (ms)") != std::string::npos);
  BOOST_TEST(throughput.find("samples/s") != std::string::npos);
  BOOST_TEST(memory.find("samples/s") == std::string::npos);
}

// base.json's plan is for ipu-mk2: its estimates (µs) are not drawn beside the CPU's
// measurements (ms); the chart says so.
BOOST_AUTO_TEST_CASE(times_of_different_devices_are_not_drawn_together) {
  const std::string throughput = render({"base.json"}, r::ChartKind::kThroughput);
  BOOST_TEST(throughput.find("\u00b5s") == std::string::npos);
  BOOST_TEST(
      throughput.find("estimates are for ipu-mk2, so they are not drawn against these CPU") !=
      std::string::npos);
  const std::string mixed =
      render({"base.json", "quick_plan.json"}, r::ChartKind::kCompare, {"run", "plan"});
  BOOST_TEST(mixed.find("not drawn, since their times are not measured on CPU: plan "
                        "(estimate for ipu-mk2)") != std::string::npos);
}

// compare --chart: one chart across the runs, not each run's charts stacked.
BOOST_AUTO_TEST_CASE(compare_draws_one_chart_across_the_runs) {
  const std::string one = render({"base.json"}, r::ChartKind::kCompare, {"base"});
  const std::string two =
      render({"base.json", "nosharding.json"}, r::ChartKind::kCompare, {"base", "nosharding"});
  const auto height = [](const std::vector<std::string>& files) {
    return r::chart_size(fixtures(files), r::ChartKind::kCompare).height;
  };
  BOOST_TEST(height({"base.json", "nosharding.json"}) == height({"base.json"}));
  BOOST_TEST(count(two, "<polyline") == 2u);  // the loss curves, overlaid
  BOOST_TEST(count(two, "<svg ") == 1u);
  BOOST_TEST(two.find("nosharding (measured)") != std::string::npos);
  BOOST_TEST(count(one, "<polyline") == 1u);
}

// The memory chart stacks each phase's bar by tensor class (it showed always-live against
// the rest alone).
BOOST_AUTO_TEST_CASE(memory_is_drawn_by_class) {
  const std::string memory = render({"base.json"}, r::ChartKind::kMemory);
  for (const char* cls : {"Weights", "Grad accumulators", "Optimizer state", "Activations"})
    BOOST_TEST(memory.find(cls) != std::string::npos, cls);
  BOOST_TEST(memory.find("always-live") == std::string::npos);
  BOOST_TEST(memory.find("stroke-width=\"1.5\"") != std::string::npos);  // measured, framed
}

// One run's chart has its loss curve (only compare drew losses), and the test loss after
// each evaluated epoch when the run evaluated while it trained.
BOOST_AUTO_TEST_CASE(a_run_has_its_own_loss_chart) {
  const std::string plain = render({"base.json"}, r::ChartKind::kThroughput);
  BOOST_TEST(plain.find("training loss per optimizer step") != std::string::npos);
  BOOST_TEST(count(plain, "<polyline") == 2u);  // samples/s and the loss
  auto sources = fixtures({"base.json"});
  sources[0].record.evaluations = {{2, 1, r::TestResult{0.5, 0.9, 100}},
                                   {4, 2, r::TestResult{0.75, 0.6, 100}}};
  std::ostringstream out;
  r::write_chart(sources, r::ChartKind::kThroughput, out);
  const std::string evaluated = out.str();
  BOOST_TEST(count(evaluated, "<polyline") == 3u);
  BOOST_TEST(evaluated.find("test loss") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(golden_charts) {
  for (const auto& [name, kind] : {std::pair{"memory", r::ChartKind::kMemory},
                                   std::pair{"throughput", r::ChartKind::kThroughput},
                                   std::pair{"compare", r::ChartKind::kCompare}}) {
    const std::string actual = render({"base.json", "nosharding.json", "quick_plan.json"}, kind,
                                      {"base", "nosharding", "quick plan"});
    BOOST_TEST(actual.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0) == 0u);
    BOOST_TEST(actual.substr(actual.size() - 7) == "</svg>\n");
    BOOST_TEST(actual == r::testing::golden(std::string("chart_") + name + ".svg", actual), name);
  }
}

BOOST_AUTO_TEST_SUITE_END()
