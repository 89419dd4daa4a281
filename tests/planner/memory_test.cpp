// The memory model on cases small enough to count by hand, and the not-fitting report.
#include "planner/memory.h"

#include <boost/test/unit_test.hpp>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/build.h"
#include "planner/device_layout.h"
#include "tests/planner/configs.h"
#include "tests/planner/helpers.h"

using namespace popkit::planner;

namespace {

std::uint64_t by(const PhaseMemory& m, TensorClass c) {
  return m.peak_by_class[static_cast<std::size_t>(c)];
}

// Two layers, a: 4 -> 3 gelu, b: 3 -> 2; R=1, micro-batch 2, accumulation 2, phased,
// weights and state remote, float32 throughout.
popkit::config::Config tiny_phased() {
  auto c = test::tiny_standard();
  c.model.layers = {
      popkit::config::make_layer("a", "linear", {{"out_features", 3}, {"activation", "gelu"}}),
      popkit::config::make_layer("b", "linear", {{"out_features", 2}})};
  c.execution.mode = popkit::config::ExecutionMode::kPhased;
  c.remote = {true, true};
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memory)

BOOST_AUTO_TEST_CASE(standard_one_layer_by_hand) {
  const Plan p = build_plan(test::tiny_standard());
  const PhaseMemory& m = p.phases[0].memory;
  // Always live: W 4x3 (48) + b (12), Adam m and v of each: 3 * 60 = 180.
  BOOST_TEST(m.always_live == 180u);
  // Loop: images 2x4 (32), out 2x3 (24; the loss writes dlogits over it), labels (8),
  // loss (4), grads 48 + 12: 128 more. And the GEMMs' workspace around the loop (workspace.h):
  // forward x W packs W^T 3x4 (kc 4, mc 3) and x^T 4x2 (nc 2), 48 and 32 bytes, each
  // rounded up to 64; the backward's x^T dz packs as much; 128.
  BOOST_TEST(m.peak == 436u);
  BOOST_TEST(m.not_always_live == 256u);
  BOOST_TEST(by(m, TensorClass::kWorkspace) == 128u);
  BOOST_TEST(by(m, TensorClass::kWeights) == 60u);
  BOOST_TEST(by(m, TensorClass::kOptimizerState) == 120u);
  BOOST_TEST(by(m, TensorClass::kGradAccumulators) == 60u);
  BOOST_TEST(by(m, TensorClass::kActivations) == 28u);
  BOOST_TEST(by(m, TensorClass::kIoSlots) == 40u);
  BOOST_TEST(p.peak_bytes == 436u);
  BOOST_TEST(p.always_live_bytes == 180u);
  BOOST_TEST(p.streaming_bytes == 0u);
  // Per step: 2 x (images 32 + labels 8 + loss 4).
  BOOST_TEST(p.host_bytes_per_step == 88u);
}

BOOST_AUTO_TEST_CASE(phased_two_layers_by_hand) {
  const Plan p = build_plan(tiny_phased());
  BOOST_REQUIRE(p.phases.size() == 3u);
  // a forward: W 48 + b 12, images 32, pre 24, out 24; workspace 128 (each phase's
  // GEMMs pack two blocks of at most 64 bytes).
  BOOST_TEST(p.phases[0].memory.peak == 268u);
  BOOST_TEST(by(p.phases[0].memory, TensorClass::kWeights) == 60u);
  BOOST_TEST(by(p.phases[0].memory, TensorClass::kIoSlots) == 32u);
  BOOST_TEST(by(p.phases[0].memory, TensorClass::kActivations) == 48u);
  // b: W 24 + b 8, in 24, out 16 (and dlogits over it), labels 8, loss 4, dx 24, grads
  // 32; 128.
  BOOST_TEST(p.phases[1].memory.peak == 268u);
  // a backward: in the loop dy 24, images 32, pre 24, grads 60 and workspace 128 (268);
  // then the update holds grads 60 + W 48 + m 48 + v 48 = 204.
  BOOST_TEST(p.phases[2].memory.peak == 268u);
  BOOST_TEST(by(p.phases[2].memory, TensorClass::kWorkspace) == 128u);
  BOOST_TEST(p.peak_phase == 0);  // the first of the three at 268
  BOOST_TEST(p.always_live_bytes == 0u);
  // Streaming: variables 3 * (60 + 32) = 276; x, dx, pre: 1 row x 2 steps x 24 each.
  BOOST_TEST(p.streaming_bytes == 276u + 3u * 48u);
}

BOOST_AUTO_TEST_CASE(plan_that_fits_the_device) {
  const Plan p = build_plan(test::mnist_phased());
  BOOST_TEST(p.fits);
  BOOST_TEST(p.memory_per_replica == 900ull * 1024 * 1024);
}

BOOST_AUTO_TEST_CASE(not_fitting_names_phase_bytes_contributors_and_help) {
  auto c = test::tiny_standard();
  c.device.memory_per_replica = 428;
  c.training.micro_batch_size = 2;
  const Plan p = build_plan(c);
  BOOST_TEST(!p.fits);
  BOOST_TEST(p.not_fitting.phase == "forward+loss+backward+optimizer");
  BOOST_TEST(p.not_fitting.bytes_over == 8u);
  const std::vector<std::string> largest{"forward+loss+backward+optimizer.workspace (128 B)",
                                         "fc.weight (48 B)", "fc.weight.adam_m (48 B)",
                                         "fc.weight.adam_v (48 B)", "fc.weight.grad (48 B)"};
  BOOST_TEST(p.not_fitting.largest == largest, boost::test_tools::per_element());
  const std::vector<std::string> help{
      "remote.optimizer_state: true keeps the optimizer state (120 B) in streaming memory",
      "remote.weights: true with execution.mode: phased keeps the weights (60 B) in streaming "
      "memory between uses",
      "a smaller training.micro_batch_size (now 2) with a larger training.gradient_accumulation "
      "keeps the global batch with fewer activation bytes"};
  BOOST_TEST(p.not_fitting.suggestions == help, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(not_fitting_suggests_sharding_and_phased_mode) {
  auto c = test::mnist_phased();
  c.execution.mode = popkit::config::ExecutionMode::kStandard;
  c.remote = {false, false};
  c.sharding.enabled = false;
  c.device.memory_per_replica = 1024 * 1024;
  const Plan p = build_plan(c);
  BOOST_TEST(!p.fits);
  BOOST_REQUIRE(p.not_fitting.suggestions.size() >= 2u);
  BOOST_TEST(p.not_fitting.suggestions[0].rfind("enable replicated tensor sharding", 0) == 0);
  const auto& s = p.not_fitting.suggestions;
  BOOST_TEST(
      std::count(s.begin(), s.end(),
                 "execution.mode: phased holds one layer's variables and activations at a time") ==
      1);
}

BOOST_AUTO_TEST_CASE(walk_rejects_a_tensor_used_before_alloc) {
  Plan p = build_plan(test::tiny_standard());
  p.phases[0].ops.erase(p.phases[0].ops.begin());  // drop "alloc images"
  BOOST_CHECK_EXCEPTION(analyse_memory(p), popkit::Error, [](const popkit::Error& e) {
    return std::string(e.what()) ==
           "plan: phase 'forward+loss+backward+optimizer', op 6 (host_load): uses 'images', which "
           "is "
           "not live";
  });
}

BOOST_AUTO_TEST_CASE(every_plan_ends_the_step_with_only_always_live_tensors) {
  // analyse_memory throws otherwise; build_plan runs it on every plan.
  auto c = test::mnist_phased();
  for (bool w : {false, true})
    for (bool s : {false, true})
      for (auto mode :
           {popkit::config::ExecutionMode::kPhased, popkit::config::ExecutionMode::kStandard}) {
        c.remote = {w, s};
        c.execution.mode = mode;
        BOOST_CHECK_NO_THROW(build_plan(c));
      }
}

// The engine's device memory block (device_layout.h).
BOOST_AUTO_TEST_CASE(first_fit_takes_the_lowest_free_range_and_merges_neighbours) {
  popkit::planner::FirstFit fit(1024);
  const auto a = fit.allocate(100), b = fit.allocate(64), c = fit.allocate(1), d = fit.allocate(0);
  BOOST_TEST(a == 0u);    // 100 rounds up to 128
  BOOST_TEST(b == 128u);  // offsets stay 64-byte aligned
  BOOST_TEST(c == 192u);
  BOOST_TEST(d == 256u);  // an empty tensor still gets its own address
  BOOST_TEST(fit.allocate(1024) == popkit::planner::FirstFit::kNone);
  fit.release(b, 64);
  BOOST_TEST(fit.allocate(128) == 320u);  // the hole at 128 is too small: the first fit after
  BOOST_TEST(fit.allocate(64) == 128u);   // but a range that fits takes the hole
  fit.release(128, 64);
  fit.release(a, 100);  // merges with the free range after it: 0..192 is one range now
  BOOST_TEST(fit.allocate(192) == 0u);
  BOOST_TEST(fit.high_water() == 448u);
  fit.release(0, 192);
  fit.release(c, 1);
  fit.release(d, 0);
  fit.release(320, 128);  // every range back: one free range of the whole block again
  BOOST_TEST(fit.allocate(1024) == 0u);
}

// The block a replica needs: at least the planned peak (first fit cannot pack tighter),
// below the sum of every tensor for the phased example, whose phases reuse each other's
// bytes.
BOOST_AUTO_TEST_CASE(device_block_is_the_peak_plus_fragmentation) {
  const Plan p = build_plan(test::mnist_phased());
  std::uint64_t every_tensor = 0;
  for (const auto& t : p.tensors) every_tensor += t.nbytes;
  const std::uint64_t block = popkit::planner::device_block_bytes(p);
  BOOST_TEST_MESSAGE("peak " << p.peak_bytes << ", block " << block << ", every tensor "
                             << every_tensor);
  BOOST_TEST(block >= p.peak_bytes);
  BOOST_TEST(block < every_tensor);
  BOOST_TEST(block <= p.peak_bytes + p.peak_bytes / 4);
}

BOOST_AUTO_TEST_SUITE_END()
