// The pipeline schedule (planner/pipeline.h): 1F1B's order, its timing against the
// dependencies, its stash depths and bubble in closed form, the diagram, the balanced
// split of layers into stages (against every split, enumerated) and the accumulation rule.
#include "planner/pipeline.h"

#include <boost/test/unit_test.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "config/validate.h"

using namespace popkit::planner;

BOOST_AUTO_TEST_SUITE(pipeline)

namespace {

std::vector<std::int64_t> ones(std::int64_t n) {
  return std::vector<std::int64_t>(static_cast<std::size_t>(n), 1);
}

std::string order_text(const std::vector<PipelineSlot>& slots) {
  std::string out;
  for (const PipelineSlot& s : slots)
    out += (out.empty() ? "" : " ") + std::string(s.work == PipelineWork::kForward ? "F" : "B") +
           std::to_string(s.micro_batch);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_f_one_b_order_ramps_up_alternates_and_drains) {
  // S 3, GA 6: stage 0 fills with 2 forwards, stage 2 (the last) alternates at once.
  BOOST_TEST(order_text(one_f_one_b_order(0, 3, 6)) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  BOOST_TEST(order_text(one_f_one_b_order(1, 3, 6)) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  BOOST_TEST(order_text(one_f_one_b_order(2, 3, 6)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than the ramp: every forward first.
  BOOST_TEST(order_text(one_f_one_b_order(0, 4, 2)) == "F0 F1 B0 B1");
}

// Every stage runs every micro-batch's forward and backward once, the backwards in
// micro-batch order (the accumulation order without pipelining), and no slot starts
// before what it waits for has ended or overlaps the stage's slot before it.
BOOST_AUTO_TEST_CASE(timing_respects_every_dependency_and_the_accumulation_order) {
  const std::vector<std::int64_t> forward{1, 3, 2, 1}, backward{2, 5, 4, 2};
  const std::int64_t ga = 9;
  const PipelineSchedule p = one_f_one_b(ga, forward, backward);
  BOOST_REQUIRE_EQUAL(p.per_stage.size(), 4u);
  std::map<std::pair<std::int64_t, std::int64_t>, const PipelineSlot*> f, b;
  for (std::int64_t s = 0; s < 4; ++s) {
    std::int64_t last_end = 0, next_backward = 0;
    for (const PipelineSlot& slot : p.per_stage[s]) {
      BOOST_TEST(slot.start >= last_end);
      last_end = slot.end;
      BOOST_TEST(slot.end - slot.start ==
                 (slot.work == PipelineWork::kForward ? forward[s] : backward[s]));
      if (slot.work == PipelineWork::kBackward) {
        BOOST_TEST(slot.micro_batch == next_backward++);
        b[{s, slot.micro_batch}] = &slot;
      } else {
        f[{s, slot.micro_batch}] = &slot;
      }
    }
    BOOST_TEST(next_backward == ga);
  }
  BOOST_REQUIRE_EQUAL(f.size(), 4u * ga);
  const auto slot = [](auto& slots, std::int64_t s, std::int64_t i) {
    return slots.at(std::pair{s, i});
  };
  for (std::int64_t s = 0; s < 4; ++s)
    for (std::int64_t i = 0; i < ga; ++i) {
      const std::int64_t forward_ready = s > 0 ? slot(f, s - 1, i)->end : 0;
      const std::int64_t backward_ready = (s == 3 ? slot(f, s, i) : slot(b, s + 1, i))->end;
      BOOST_TEST(slot(f, s, i)->start >= forward_ready);
      BOOST_TEST(slot(b, s, i)->start >= backward_ready);
    }
}

// With equal stage times the bubble is (S-1)/(GA+S-1) and each stage keeps
// min(S-s, GA) micro-batches' activations.
BOOST_AUTO_TEST_CASE(bubble_and_stash_depth_in_closed_form) {
  for (std::int64_t stages = 1; stages <= 5; ++stages)
    for (const std::int64_t ga : {1, 2, 4, 7, 10, 16}) {
      const PipelineSchedule p = one_f_one_b(ga, ones(stages), ones(stages));
      BOOST_TEST(p.makespan == 2 * (ga + stages - 1), "S " << stages << " GA " << ga);
      BOOST_TEST(p.bubble_fraction() == ideal_bubble_fraction(stages, ga),
                 boost::test_tools::tolerance(1e-12));
      for (std::int64_t s = 0; s < stages; ++s)
        BOOST_TEST(p.stash_depth[s] == std::min(stages - s, ga), "S " << stages << " s " << s);
    }
}

BOOST_AUTO_TEST_CASE(diagram_is_time_by_stage) {
  const PipelineSchedule p = one_f_one_b(4, ones(2), ones(2));
  BOOST_TEST(schedule_diagram(p) ==
             "stage 0 | F0 F1 .  B0 F2 B1 F3 B2 .  B3\n"
             "stage 1 | .  F0 B0 F1 B1 F2 B2 F3 B3 .\n");
}

// The balanced split against brute force: every way to cut n layers into S contiguous
// non-empty stages.
BOOST_AUTO_TEST_CASE(balance_stages_minimises_the_costliest_stage) {
  const std::vector<double> costs{5, 1, 1, 8, 2, 2, 3, 9, 1, 4};
  for (std::int64_t stages = 1; stages <= 5; ++stages) {
    const auto starts = balance_stages(costs, stages);
    BOOST_REQUIRE_EQUAL(starts.size(), static_cast<std::size_t>(stages));
    BOOST_TEST(starts[0] == 0);
    const auto worst_of = [&](const std::vector<std::int64_t>& cut) {
      double worst = 0;
      for (std::size_t k = 0; k < cut.size(); ++k) {
        const std::int64_t end = k + 1 < cut.size() ? cut[k + 1] : 10;
        double sum = 0;
        for (std::int64_t i = cut[k]; i < end; ++i) sum += costs[i];
        worst = std::max(worst, sum);
      }
      return worst;
    };
    for (std::size_t k = 1; k < starts.size(); ++k) BOOST_TEST(starts[k] > starts[k - 1]);
    double best = 1e300;
    // All cuts: choose stages-1 boundaries among positions 1..9.
    for (unsigned mask = 0; mask < (1u << 9); ++mask) {
      if (__builtin_popcount(mask) != stages - 1) continue;
      std::vector<std::int64_t> cut{0};
      for (int pos = 1; pos <= 9; ++pos)
        if (mask & (1u << (pos - 1))) cut.push_back(pos);
      best = std::min(best, worst_of(cut));
    }
    BOOST_TEST(worst_of(starts) == best, "stages " << stages);
  }
  BOOST_CHECK_THROW((void)balance_stages(costs, 11), popkit::Error);
}

BOOST_AUTO_TEST_CASE(accumulation_rule_names_the_numbers) {
  BOOST_TEST(popkit::config::pipeline_accumulation_rule(3, 6).empty());
  const std::string m = popkit::config::pipeline_accumulation_rule(3, 5);
  BOOST_TEST(m.find(">= 2 x stages = 6, got 5") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
