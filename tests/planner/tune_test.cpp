// The tuner on a tiny model whose winner follows in closed form: with round figures and
// no overheads, every transfer costs a latency and nothing else is comparable, so the
// fastest plan is the one with the fewest transfers: standard mode, nothing remote, one
// micro-batch per step, io_mode compute (io tiles take compute away, and one repeat step
// has nothing to overlap).
#include "planner/tune.h"

#include <boost/test/unit_test.hpp>
#include <set>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/build.h"
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
  for (std::size_t i = 1; i < r.fits.size(); ++i)
    BOOST_TEST(r.fits[i - 1].samples_per_second >= r.fits[i].samples_per_second);
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
  const FitAdvice a = advise_fit(c);
  BOOST_TEST(a.fits);
  BOOST_TEST(a.settings == std::vector<std::string>{"remote.optimizer_state=true"},
             boost::test_tools::per_element());
  BOOST_TEST(a.peak_bytes == peak - 2 * 15 * 4);
  BOOST_TEST(a.n_planned == 54u);

  // 1 B less than that: off-device state and one sample per micro-batch (3 settings)
  // beat every candidate that needs more; the state alone no longer fits.
  c.device.memory_per_replica = a.peak_bytes - 1;
  const FitAdvice b = advise_fit(c);
  BOOST_TEST(b.fits);
  const std::vector<std::string> three{"remote.optimizer_state=true", "training.micro_batch_size=1",
                                       "training.gradient_accumulation=4"};
  BOOST_TEST(b.settings == three, boost::test_tools::per_element());
  BOOST_TEST(b.peak_bytes <= a.peak_bytes - 1);

  // Below the least peak of all: nothing fits, and the advice names that least peak.
  const TuneResult all = popkit::planner::tune(c, {1ull << 30});
  c.device.memory_per_replica = all.smallest->peak_bytes - 1;
  const FitAdvice none = advise_fit(c);
  BOOST_TEST(!none.fits);
  BOOST_TEST(none.peak_bytes == all.smallest->peak_bytes);
  BOOST_TEST(!none.settings.empty());
}

BOOST_AUTO_TEST_SUITE_END()
