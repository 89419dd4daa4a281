// The diagrams of popplan's --chart: each replica drawn in its group's box colour and
// label, a phase's column saying what the plan's ops move and compute, and a pipeline's
// sync marks where its sync pattern makes the devices meet.
#include "reports/diagrams.h"

#include <boost/test/unit_test.hpp>
#include <regex>
#include <sstream>

#include "base/error.h"
#include "planner/build.h"
#include "tests/planner/configs.h"

namespace r = popkit::reports;
namespace planner = popkit::planner;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The fill of the box whose label is replica `replica` in the first row drawn.
std::string fill_of(const std::string& svg, int replica) {
  const std::regex box("fill=\"(#[0-9a-f]{6})\" stroke=\"#888888\"[^\n]*\n<text[^>]*>" +
                       std::to_string(replica) + "</text>");
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(svg, m, box));
  return m[1];
}

std::string groups_svg(const std::vector<r::NamedGrouping>& groupings) {
  std::ostringstream out;
  r::write_groups_svg(out, groupings);
  return out.str();
}

std::string plan_svg(const popkit::config::Config& c) {
  std::ostringstream out;
  r::write_plan_svg(out, planner::build_plan(c));
  return out.str();
}

popkit::config::Config pipelined(popkit::config::SyncPattern pattern) {
  popkit::config::Config c = planner::test::mnist_phased();
  c.execution.mode = popkit::config::ExecutionMode::kStandard;
  c.remote = {};
  c.sharding.enabled = false;
  c.training.gradient_accumulation = 4;
  c.pipeline.stages = 2;
  c.execution.sync_pattern = pattern;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(diagrams)

BOOST_AUTO_TEST_CASE(a_replica_takes_its_groups_colour_and_label) {
  // (2, 2) over 4: groups {0, 2} and {1, 3}.
  const std::string svg = groups_svg({{"orthogonal", {4, 2, 2}}});
  BOOST_TEST(fill_of(svg, 0) == fill_of(svg, 2));
  BOOST_TEST(fill_of(svg, 1) == fill_of(svg, 3));
  BOOST_TEST(fill_of(svg, 0) != fill_of(svg, 1));
  BOOST_TEST(count(svg, ">g0</text>") == 2u);
  BOOST_TEST(count(svg, ">g1</text>") == 2u);
  BOOST_TEST(svg.find("group_size 2, stride 2: 2 groups") != std::string::npos);
  // Consecutive groups of the same shape colour 0, 1 alike instead.
  const std::string consecutive = groups_svg({{"consecutive", {4, 2, 1}}});
  BOOST_TEST(fill_of(consecutive, 0) == fill_of(consecutive, 1));
  BOOST_TEST(fill_of(consecutive, 1) != fill_of(consecutive, 2));
}

BOOST_AUTO_TEST_CASE(too_many_replicas_are_refused_not_drawn) {
  BOOST_CHECK_THROW(groups_svg({{"all", {r::kMostDrawnReplicas + 1, 1, 1}}}), popkit::Error);
  BOOST_CHECK_NO_THROW(groups_svg({{"all", {r::kMostDrawnReplicas, 1, 1}}}));
}

BOOST_AUTO_TEST_CASE(each_phase_says_what_it_moves_and_computes) {
  const std::string svg = plan_svg(planner::test::mnist_phased());
  for (int phase = 1; phase <= 7; ++phase)
    BOOST_TEST(svg.find(">phase " + std::to_string(phase) + "</text>") != std::string::npos);
  BOOST_TEST(svg.find(">phase 8</text>") == std::string::npos);
  // Every phase computes its 4 micro-batches; the forward phases reduce nothing, the
  // last layer's and the backward ones update the weight and the bias of their layer.
  BOOST_TEST(count(svg, ">4 micro-batches</text>") == 7u);
  BOOST_TEST(count(svg, ">2 variables</text>") == 4u);
  BOOST_TEST(svg.find(">fwd fc1</text>") != std::string::npos);
  BOOST_TEST(svg.find(">bwd fc1</text>") != std::string::npos);
  BOOST_TEST(svg.find("program peak 3.06 MiB (phase 7)") != std::string::npos);
  // Standard mode without anything remote has one phase and no streaming-memory lanes.
  popkit::config::Config standard = planner::test::mnist_phased();
  standard.execution.mode = popkit::config::ExecutionMode::kStandard;
  standard.remote = {};
  const std::string one = plan_svg(standard);
  BOOST_TEST(one.find(">phase 2</text>") == std::string::npos);
  BOOST_TEST(one.find("streaming memory to") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_pipeline_marks_the_cycles_its_sync_pattern_meets_at) {
  const std::string mark = "height=\"3.0\" fill=\"#222222\"";
  const std::string full = plan_svg(pipelined(popkit::config::SyncPattern::kFull));
  const std::string ladder = plan_svg(pipelined(popkit::config::SyncPattern::kReplicaAndLadder));
  BOOST_TEST(full.find("device 3: replica 1, stage 1") != std::string::npos);
  BOOST_TEST(count(full, ">F3</text>") == 4u);  // micro-batch 3's forward on each device
  BOOST_TEST(count(full, ">B3</text>") == 4u);
  // full: every device meets at every cycle; the ladder sets only at their host IO.
  BOOST_TEST(count(full, mark) > count(ladder, mark));
  BOOST_TEST(count(ladder, mark) > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
