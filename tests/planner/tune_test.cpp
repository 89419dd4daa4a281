// The tuner on a tiny model whose winner follows in closed form: with round figures and
// no overheads, every transfer costs a latency and nothing else is comparable, so the
// fastest plan is the one with the fewest transfers: standard mode, nothing remote, one
// micro-batch per step, io_mode compute (io tiles take compute away, and one repeat step
// has nothing to overlap).
#include "planner/tune.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <limits>
#include <set>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/build.h"
#include "planner/estimate_check.h"
#include "planner/fit_advice.h"
#include "tests/planner/configs.h"
#include "tests/support/test_profile.h"

using namespace popkit::planner;

namespace {

// input [4], one linear 4 -> 3, R replicas, micro-batch 2, accumulation 2, synthetic data.
popkit::config::Config tiny(std::int64_t replicas) {
  popkit::config::Config c;
  c.name = "tiny";
  c.model.input_shape = {4};
  c.model.layers = {popkit::config::make_layer("fc", "linear", {{"out_features", 3}})};
  c.replication.factor = replicas;
  c.training.micro_batch_size = 2;
  c.training.gradient_accumulation = 2;
  c.data.dataset = popkit::config::Dataset::kSynthetic;  // MNIST needs [28, 28] and 10 classes
  return popkit::test_support::with_test_profile(c);
}

const std::vector<std::string> kWinner{
    "execution.mode=standard",         "remote.weights=false",      "remote.optimizer_state=false",
    "sharding.enabled=false",          "execution.io_mode=compute", "training.micro_batch_size=4",
    "training.gradient_accumulation=1"};

}  // namespace

BOOST_AUTO_TEST_SUITE(tuner)

BOOST_AUTO_TEST_CASE(the_fewest_transfers_win) {
  const TuneResult r = popkit::planner::tune(tiny(1), {1ull << 30});
  // 6 placements (standard: state on or off device; phased: weights and state each) x 3
  // io modes x 3 splits of 4 samples (1x4, 2x2, 4x1); no sharding with one replica.
  BOOST_TEST(r.n_planned == 54u);
  BOOST_REQUIRE(r.fits.size() == 54u);
  BOOST_TEST(r.fits.front().settings == kWinner, boost::test_tools::per_element());
  BOOST_TEST(r.fits.front().pareto);
  BOOST_TEST(r.fits.front().row_on_front);
  BOOST_TEST(r.device_profile == r.fits.front().config.device.resolved->name);
  BOOST_TEST(r.n_combinations == 54u);
  BOOST_TEST(r.thinned.empty());
}

// Rows: the candidates within 1% of a row's fastest, or of its lead, are one row, led by
// the one with the fewest changes of the whole row (then the fastest); each row's fastest
// is more than 1% slower than the previous row's lead. A candidate that joins a row for
// being within 1% of the lead, not of the fastest, may have fewer changes than the lead:
// it leads then (the MNIST example's placements gave such rows).
namespace {

void check_rows(const TuneResult& r) {
  BOOST_REQUIRE(!r.fits.empty());
  double previous_lead = 0.0;
  std::size_t rows = 0;
  for (std::size_t first = 0; first < r.fits.size();) {
    std::size_t end = first;
    double fastest = 0.0;
    while (end < r.fits.size() && r.fits[end].row == r.fits[first].row)
      fastest = std::max(fastest, r.fits[end++].samples_per_second);
    BOOST_TEST(r.fits[first].row == ++rows);
    const TuneCandidate& lead = r.fits[first];
    for (std::size_t i = first; i < end; ++i) {
      BOOST_TEST(r.fits[i].samples_per_second >= 0.99 * lead.samples_per_second);
      BOOST_TEST(lead.changes.size() <= r.fits[i].changes.size(),
                 "row " << rows << ": the lead has " << lead.changes.size() << " changes, "
                        << r.fits[i].samples_per_second << " samples/s has "
                        << r.fits[i].changes.size());
    }
    if (previous_lead > 0) BOOST_TEST(fastest < 0.99 * previous_lead);
    previous_lead = lead.samples_per_second;
    first = end;
  }
  BOOST_TEST(r.n_rows == rows);
}

}  // namespace

BOOST_AUTO_TEST_CASE(alike_candidates_are_one_row_led_by_the_fewest_changes) {
  const TuneResult r = popkit::planner::tune(tiny(2), {1ull << 30});
  check_rows(r);
  BOOST_TEST(r.n_rows < r.fits.size());  // some are alike
  check_rows(popkit::planner::tune(test::mnist_phased(), {900ull << 20}));
  auto onchip = test::mnist_phased();
  onchip.execution.mode = popkit::config::ExecutionMode::kStandard;
  onchip.remote = {};
  check_rows(popkit::planner::tune(onchip, {900ull << 20}));
}

// A search past its bound is thinned, the config's own micro-batch kept, and says so; one
// that cannot be thinned enough is refused with the limit named. 256 replicas and a
// global batch of 2^18 gave 23,148 combinations of the MNIST example, minutes of work.
BOOST_AUTO_TEST_CASE(the_search_is_bounded) {
  TuneRequest request{1ull << 30, 256, 1 << 18};
  request.max_combinations = 600;
  const TuneResult r = popkit::planner::tune(tiny(1), request);
  // 6 placements x (off + 8 groups x 2 thresholds) x 3 io modes x 11 micro-batches.
  BOOST_TEST(r.n_combinations == 6u * 17u * 3u * 11u);
  BOOST_TEST(r.n_planned <= 600u);
  BOOST_REQUIRE(!r.thinned.empty());
  BOOST_TEST(r.thinned.front().rfind("micro-batches 1, ", 0) == 0u, r.thinned.front());
  std::set<std::int64_t> micro_batches;
  for (const auto& f : r.fits) micro_batches.insert(f.config.training.micro_batch_size);
  BOOST_TEST(micro_batches.count(1) == 1u);
  BOOST_TEST(micro_batches.count(1024) == 1u);
  BOOST_TEST(micro_batches.size() < 11u);
  request.max_combinations = 100;
  BOOST_CHECK_EXCEPTION(popkit::planner::tune(tiny(1), request), popkit::Error,
                        [](const popkit::Error& e) {
                          return std::string(e.what()).find(
                                     "more than the 100 popplan tune "
                                     "plans at most") != std::string::npos;
                        });
  // Huge batches: refused past 2^40, quick below (divisors in O(sqrt n)).
  BOOST_CHECK_THROW(popkit::planner::tune(tiny(1), {1ull << 30, 1, (std::int64_t{1} << 40) + 1}),
                    popkit::Error);
  BOOST_CHECK_THROW(popkit::planner::tune(tiny(1), {1ull << 30, 65537, 65537}), popkit::Error);
}

// A plan's work grows with the layers: past kTuneFullSearchLayers, the search plans fewer
// combinations in proportion (the largest config's 14,000 layers took minutes).
BOOST_AUTO_TEST_CASE(the_bound_shrinks_with_the_layers) {
  using popkit::planner::tune_combinations_cap;
  BOOST_TEST(tune_combinations_cap(4096, 4) == 4096u);
  BOOST_TEST(tune_combinations_cap(4096, 64) == 4096u);
  BOOST_TEST(tune_combinations_cap(4096, 128) == 2048u);
  BOOST_TEST(tune_combinations_cap(4096, 14000) == 18u);
  BOOST_TEST(tune_combinations_cap(1, 14000) == 1u);
  BOOST_TEST(tune_combinations_cap(std::numeric_limits<std::size_t>::max(), 65) <
             std::numeric_limits<std::size_t>::max());  // no overflow
}

BOOST_AUTO_TEST_CASE(the_front_is_memory_against_samples_per_second) {
  const TuneResult all = popkit::planner::tune(tiny(2), {1ull << 30});
  // Sharding over the group of 2 from thresholds 3 (bias and weight) or 12 (weight), or
  // off: 3 x 6 placements x 3 io modes x 3 splits of 8 samples over 2 replicas.
  BOOST_TEST(all.n_planned == 162u);
  for (const auto& a : all.fits) {
    bool dominated = false;
    for (const auto& b : all.fits)
      dominated = dominated ||
                  (b.peak_bytes <= a.peak_bytes && b.samples_per_second >= a.samples_per_second &&
                   (b.peak_bytes < a.peak_bytes || b.samples_per_second > a.samples_per_second));
    BOOST_TEST(a.pareto == !dominated);
  }
  // With the memory of the smallest candidate, only candidates that small fit, and the
  // fastest of them (and its ties) are the whole front.
  std::uint64_t least = UINT64_MAX;
  for (const auto& a : all.fits) least = std::min(least, a.peak_bytes);
  const TuneResult small = popkit::planner::tune(tiny(2), {least});
  BOOST_REQUIRE(!small.fits.empty());
  for (const auto& a : small.fits) {
    BOOST_TEST(a.peak_bytes == least);
    BOOST_TEST(a.pareto == (a.samples_per_second == small.fits.front().samples_per_second));
  }
  BOOST_TEST(small.fits.front().pareto);
  BOOST_TEST(popkit::planner::tune(tiny(2), {least - 1}).fits.empty());
}

BOOST_AUTO_TEST_CASE(replicas_and_global_batch) {
  const TuneResult r = popkit::planner::tune(tiny(1), {1ull << 30, 2, 12});
  BOOST_REQUIRE(!r.fits.empty());
  BOOST_TEST(r.fits.front().settings.front() == "replication.factor=2");
  BOOST_TEST(r.fits.front().config.training.micro_batch_size == 6);
  BOOST_CHECK_THROW(popkit::planner::tune(tiny(1), {1ull << 30, 4, 6}), popkit::Error);
}

// tiny(1) in standard mode peaks with everything live at once; its Adam state, m and v
// of 4 x 3 + 3 float32 elements, is 2 x 15 x 4 = 120 B of that peak and lives on device
// all the time. One byte less than the peak: the only single setting that lowers the
// peak is remote.optimizer_state=true (phased mode with one layer plans the same phase;
// io modes add IO slots), so it is the advice, at exactly 120 B less. The micro-batch
// split needs two settings (micro_batch_size and gradient_accumulation).
BOOST_AUTO_TEST_CASE(pipeline_stages_share_the_same_devices) {
  // Two layers on R 2 (2 devices), global batch 16: besides R 2 without pipelining, one
  // replica of 2 stages, whose accumulation must be >= 2 x 2 (micro-batch 1, 2 or 4 of
  // 16), in standard mode with the optimizer state on device, io_mode compute or io
  // (pipelining refuses phased, remote optimizer state and io_overlapped), and nothing
  // to shard over: 2 x 3 = 6 candidates.
  popkit::config::Config c = tiny(2);
  c.model.layers.push_back(popkit::config::make_layer("fc2", "linear", {{"out_features", 2}}));
  c.training.gradient_accumulation = 4;
  const TuneResult r = popkit::planner::tune(c, {1ull << 30});
  std::size_t pipelined = 0;
  for (const auto& f : r.fits) {
    const auto& x = f.config;
    BOOST_TEST(x.replication.factor * x.pipeline.stages == 2);
    BOOST_TEST(x.replication.factor * x.training.micro_batch_size *
                   x.training.gradient_accumulation ==
               16);
    if (x.pipeline.stages == 1) continue;
    ++pipelined;
    BOOST_TEST(x.training.gradient_accumulation >= 4);
    BOOST_TEST((x.execution.mode == popkit::config::ExecutionMode::kStandard));
    BOOST_TEST(!x.remote.optimizer_state);
    BOOST_TEST((x.execution.io_mode != popkit::config::IoMode::kIoOverlapped));
    const std::set<std::string> settings(f.settings.begin(), f.settings.end());
    BOOST_TEST(settings.count("replication.factor=1") == 1u);
    BOOST_TEST(settings.count("pipeline.stages=2") == 1u);
  }
  BOOST_TEST(pipelined == 6u);
}

BOOST_AUTO_TEST_CASE(fit_advice_is_the_fewest_changes_that_fit) {
  popkit::config::Config c = tiny(1);
  const std::uint64_t peak = build_plan_for_estimate(c).peak_bytes;
  c.device.memory_per_replica = peak - 1;
  BOOST_REQUIRE(!build_plan_for_estimate(c).fits);
  const FitAdvice a = advise_fit(c).front();
  BOOST_TEST(a.fits);
  BOOST_TEST(a.settings == std::vector<std::string>{"remote.optimizer_state=true"},
             boost::test_tools::per_element());
  BOOST_TEST(a.peak_bytes == peak - 2 * 15 * 4);
  // What the search planned: of 54, the larger micro-batches than one that does not fit
  // are skipped.
  const TuneResult searched = popkit::planner::tune(c, {c.device.memory_per_replica});
  BOOST_TEST(a.n_planned == searched.n_planned);
  BOOST_TEST(searched.n_planned + searched.n_skipped == 54u);
  BOOST_TEST(searched.n_skipped > 0u);

  // 1 B less than that: off-device state and one sample per micro-batch (3 settings)
  // beat every candidate that needs more; the state alone no longer fits.
  c.device.memory_per_replica = a.peak_bytes - 1;
  const FitAdvice b = advise_fit(c).front();
  BOOST_TEST(b.fits);
  const std::vector<std::string> three{"remote.optimizer_state=true", "training.micro_batch_size=1",
                                       "training.gradient_accumulation=4"};
  BOOST_TEST(b.settings == three, boost::test_tools::per_element());
  BOOST_TEST(b.peak_bytes <= a.peak_bytes - 1);

  // Below what anything planned reaches: no advice but the least peak, and no changes
  // (a change that leaves the peak over the budget is not advice). tiny's least peak is
  // its workspace and tensors of a few elements, the same over more replicas.
  c.device.memory_per_replica = 1;
  const std::vector<FitAdvice> none = advise_fit(c);
  BOOST_TEST_REQUIRE(none.size() == 1u);
  BOOST_TEST(!none.front().fits);
  BOOST_TEST(none.front().settings.empty());
  BOOST_TEST(none.front().peak_bytes > 1u);
}

// Below the least peak of all at 1 replica, more replicas (checked by planning them)
// shard a 64 x 64 layer's weight and Adam state: the advice is the fewest that fit, at
// the same global batch. Before, the advice was a candidate that did not fit.
BOOST_AUTO_TEST_CASE(more_replicas_are_advised_when_they_fit) {
  popkit::config::Config c = tiny(1);
  c.model.input_shape = {64};
  c.model.layers.front().attributes.set("out_features", 64);
  const TuneResult all = popkit::planner::tune(c, {1ull << 30});
  c.device.memory_per_replica = all.smallest->peak_bytes - 1;
  const FitAdvice more = advise_fit(c).front();
  BOOST_TEST_REQUIRE(more.fits);
  BOOST_TEST(more.peak_bytes <= c.device.memory_per_replica);
  BOOST_TEST(std::count(more.settings.begin(), more.settings.end(), "replication.factor=2") == 1);
  const TuneResult at_two = popkit::planner::tune(c, {c.device.memory_per_replica, 2, 4});
  BOOST_TEST_REQUIRE(!at_two.fits.empty());
  std::uint64_t least = UINT64_MAX;
  for (const auto& f : at_two.fits) least = std::min(least, f.peak_bytes);
  BOOST_TEST(least <= more.peak_bytes);
}

// An evaluation plan that does not fit: a smaller eval micro-batch, planned and fitting.
BOOST_AUTO_TEST_CASE(evaluation_advice_is_planned) {
  popkit::config::Config c = tiny(1);
  c.eval.micro_batch_size = 64;
  const std::uint64_t peak = build_plan(c, Program::kEval).peak_bytes;
  c.device.memory_per_replica = peak - 1;
  const std::vector<FitAdvice> advice = advise_fit(c, Program::kEval);
  BOOST_TEST_REQUIRE(advice.front().fits);
  BOOST_TEST(advice.front().settings == std::vector<std::string>{"eval.micro_batch_size=32"},
             boost::test_tools::per_element());
  popkit::config::Config smaller = c;
  smaller.eval.micro_batch_size = 32;
  BOOST_TEST(build_plan(smaller, Program::kEval).peak_bytes == advice.front().peak_bytes);
  BOOST_TEST(advice.front().peak_bytes < peak);
}

// A plan whose estimate is not a finite time (a profile figure out of range) is refused
// by every tool that shows it, naming the profile and the phase; a finite one passes.
BOOST_AUTO_TEST_CASE(estimates_that_are_not_finite_are_refused) {
  popkit::planner::Plan plan = build_plan_for_estimate(tiny(2));
  BOOST_TEST(popkit::planner::estimate_problem(plan).empty());
  plan.phases.back().estimated_seconds = std::numeric_limits<double>::infinity();
  plan.estimated_step_seconds = std::numeric_limits<double>::infinity();
  plan.estimated_samples_per_second = 0;
  const std::string why = popkit::planner::estimate_problem(plan);
  BOOST_TEST(why.find("prices this plan at inf s a step, 0 samples/s") != std::string::npos, why);
  BOOST_TEST(why.find("phase " + std::to_string(plan.phases.size())) != std::string::npos, why);
}

// The search plans a chain of candidates that differ only in the micro-batch smallest
// first and stops at the first that does not fit: memory grows with the micro-batch. At
// budgets that part the candidates (a quarter, half and three quarters of them fit), the
// MLP phased with RTS and a tied GPT (pipelined splits included) give the same fits in
// the same order, and the same least peak, as planning every micro-batch, and skip some.
BOOST_AUTO_TEST_CASE(larger_micro_batches_than_one_that_does_not_fit_do_not_fit) {
  popkit::config::Config gpt = test::gpt();
  gpt.replication.factor = 2;
  gpt.training.gradient_accumulation = 4;
  for (const popkit::config::Config& c : {test::mnist_phased(), gpt}) {
    TuneRequest every{1ull << 40};
    every.every_micro_batch = true;
    std::vector<std::uint64_t> peaks;
    for (const auto& f : popkit::planner::tune(c, every).fits) peaks.push_back(f.peak_bytes);
    std::sort(peaks.begin(), peaks.end());
    BOOST_TEST_REQUIRE(peaks.size() > 20u);
    std::size_t skipped = 0;
    for (const std::size_t quarter : {1, 2, 3}) {
      const std::uint64_t budget = peaks[peaks.size() * quarter / 4];
      every.memory_per_replica = budget;
      const TuneResult all = popkit::planner::tune(c, every);
      const TuneResult pruned = popkit::planner::tune(c, {budget});
      BOOST_TEST_REQUIRE(pruned.fits.size() == all.fits.size());
      for (std::size_t i = 0; i < all.fits.size(); ++i)
        BOOST_TEST(pruned.fits[i].settings == all.fits[i].settings,
                   boost::test_tools::per_element());
      BOOST_TEST(pruned.smallest->peak_bytes == all.smallest->peak_bytes);
      BOOST_TEST(all.n_skipped == 0u);
      BOOST_TEST(pruned.n_planned < all.n_planned);
      BOOST_TEST(pruned.n_planned + pruned.n_skipped >= all.n_planned);
      skipped += pruned.n_skipped;
    }
    BOOST_TEST(skipped > 0u);
  }
}

BOOST_AUTO_TEST_SUITE_END()
