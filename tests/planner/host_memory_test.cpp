// The host memory estimate on a model small enough to count by hand, sums that
// saturate instead of wrapping, the messages, and POPKIT_HOST_MEMORY.
#include "planner/host_memory.h"

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <limits>

#include "base/error.h"
#include "configs.h"
#include "planner/build.h"
#include "planner/device_layout.h"

using namespace popkit;
using namespace popkit::planner;

namespace {

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      ::unsetenv(name_);
    else
      ::setenv(name_, old_.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(host_memory)

// tiny_standard: input [4], fc 4 -> 3, R = 1, micro-batch 2 x accumulation 2.
BOOST_AUTO_TEST_CASE(counted_by_hand) {
  const config::Config c = test::tiny_standard();
  const Plan plan = build_plan(c);
  const Plan eval = build_plan(c, Program::kEval);
  const HostMemory m =
      estimate_host_memory(plan, &eval, c, {DatasetSize{100, 4}, DatasetSize{10, 4}});
  // Held: 100 x (4 + 1) + 10 x (4 + 1); the largest copy is the training file's bytes
  // while it is read (500 + the IDX headers 16 + 8).
  BOOST_TEST(m.datasets == 500u + 50u + 524u);
  BOOST_TEST(m.datasets_counted);
  BOOST_TEST(m.streaming == 0u);  // standard mode, nothing remote
  // Each engine's device memory block (device_layout.h). The evaluation engine's: fc.weight
  // 48, fc.bias 12, the images [2, 4] 32, the logits [2, 3] 24 bytes and the forward's
  // GEMM workspace 128, all live at once, each at a 64-byte aligned offset.
  BOOST_TEST(device_block_bytes(eval) == 64u + 64u + 64u + 64u + 128u);
  BOOST_TEST(device_block_bytes(plan) >= plan.peak_bytes);
  BOOST_TEST(m.device == device_block_bytes(plan) + device_block_bytes(eval));
  // Global batch 4 x 5 + order 100 x 16 + max(evaluation, checkpoint, run file):
  //   evaluation: fc.weight's copy 48 + its batch 4 x (4 + 1) + logits 4 x 3 x 4 = 116
  //   checkpoint: (weight, bias, Adam m and v) 15 x 4 x 3 + fc.weight's copy 48 = 228
  //   run file: one replica's memory in each plan's one phase, 2 x 2560
  BOOST_REQUIRE(plan.phases.size() == 1u);
  BOOST_REQUIRE(eval.phases.size() == 1u);
  BOOST_TEST(m.host_buffers == 20u + 1600u + 2 * kRunFileBytesPerReplicaPhase);
  // poprun eval: the evaluation engine alone, the weights it read (15 x 4) and the
  // checkpoint file while it is read (15 x 4 x 3, Adam's state too).
  const HostMemory e = estimate_host_memory(
      eval, nullptr, c, {DatasetSize{100, 4}, DatasetSize{10, 4}}, HostUse::kEvaluate);
  BOOST_TEST(e.device == device_block_bytes(eval));
  BOOST_TEST(e.datasets == 50u + 50u + 24u);  // the test set and its file while read
  BOOST_TEST(e.host_buffers == 60u + 180u);
  // The process, and each engine's device of its one replica: a pointer per tensor and a
  // sample of its one phase.
  BOOST_TEST(m.overhead == kProcessBytes +
                               (kDeviceBytes + 8 * plan.tensors.size() + kPhaseSampleBytes) +
                               (kDeviceBytes + 8 * eval.tensors.size() + kPhaseSampleBytes));
  BOOST_TEST(e.overhead ==
             kProcessBytes + kDeviceBytes + 8 * eval.tensors.size() + kPhaseSampleBytes);
  BOOST_TEST(m.total() == m.datasets + m.device + m.host_buffers + m.overhead);
  // Synthetic data: the loading copy is the class prototypes (3 classes x 4 pixels x 8).
  config::Config synthetic = c;
  synthetic.data.dataset = config::Dataset::kSynthetic;
  BOOST_TEST(estimate_host_memory(plan, &eval, synthetic, {DatasetSize{100, 4}, DatasetSize{10, 4}})
                 .datasets == 500u + 50u + 96u);
}

BOOST_AUTO_TEST_CASE(device_and_streaming_memory_count_every_replica) {
  const config::Config c = test::mnist_phased();  // R = 2, weights and state remote
  const Plan plan = build_plan(c);
  const Plan eval = build_plan(c, Program::kEval);
  const HostMemory m = estimate_host_memory(plan, &eval, c, {});
  BOOST_TEST(m.streaming == 2 * (plan.streaming_bytes + eval.streaming_bytes));
  BOOST_TEST(m.device == 2 * (device_block_bytes(plan) + device_block_bytes(eval)));
  // Each engine's bookkeeping, and the run file's measured memory, count every replica.
  const auto bookkeeping = [](const Plan& p) {
    return 2 * (kDeviceBytes + 8 * p.tensors.size() + kPhaseSampleBytes * p.phases.size());
  };
  BOOST_TEST(m.overhead == kProcessBytes + bookkeeping(plan) + bookkeeping(eval));
  BOOST_TEST(m.host_buffers >=
             2 * (plan.phases.size() + eval.phases.size()) * kRunFileBytesPerReplicaPhase);
  // Data read from files is not known to the planner.
  BOOST_TEST(!m.datasets_counted);
  BOOST_TEST(m.datasets == 0u);
  BOOST_TEST(!plan.host_memory.datasets_counted);
}

BOOST_AUTO_TEST_CASE(synthetic_sizes_come_from_the_config) {
  config::Config c = test::tiny_standard();
  c.data.dataset = config::Dataset::kSynthetic;
  c.data.synthetic_train = 100;
  c.data.synthetic_test = 10;
  const DatasetSizes sizes = dataset_sizes_from_config(c);
  BOOST_REQUIRE(sizes.train && sizes.test);
  BOOST_TEST(sizes.train->n == 100);
  BOOST_TEST(sizes.test->image_bytes == 4);
  const Plan plan = build_plan(c);
  BOOST_TEST(plan.host_memory.datasets_counted);
  BOOST_TEST(plan.host_memory.datasets == 500u + 50u + 96u);
}

BOOST_AUTO_TEST_CASE(sizes_beyond_64_bits_saturate) {
  config::Config c = test::tiny_standard();
  c.data.dataset = config::Dataset::kSynthetic;
  const Plan plan = build_plan(c);
  const auto huge = std::numeric_limits<std::int64_t>::max();
  const HostMemory m =
      estimate_host_memory(plan, nullptr, c, {DatasetSize{huge, huge}, DatasetSize{1, 4}});
  BOOST_TEST(m.datasets == std::numeric_limits<std::uint64_t>::max());
  BOOST_TEST(m.total() == std::numeric_limits<std::uint64_t>::max());
}

BOOST_AUTO_TEST_CASE(messages) {
  HostMemory m;
  m.datasets = 3ull << 30;
  m.streaming = 1ull << 20;
  m.device = 2ull << 20;
  m.host_buffers = 512ull << 10;
  m.overhead = 16ull << 20;
  BOOST_TEST(describe_host_memory(m) ==
             "3.02 GiB (datasets 3.00 GiB, streaming memory 1.00 MiB, device memory 2.00 MiB, "
             "host buffers 512.00 KiB, overhead 16.00 MiB)");
  BOOST_TEST(host_memory_problem(m, AvailableMemory{1ull << 30, "MemAvailable in /proc/meminfo"}) ==
             "the run needs 3.02 GiB of host memory (datasets 3.00 GiB, streaming memory 1.00 "
             "MiB, device memory 2.00 MiB, host buffers 512.00 KiB, overhead 16.00 MiB) but this "
             "machine has 1.00 GiB available (MemAvailable in /proc/meminfo)");
  BOOST_TEST(host_memory_problem(m, AvailableMemory{4ull << 30, "x"}).empty());
  BOOST_TEST(host_memory_problem(m, std::nullopt).empty());  // nothing known, nothing checked
  m.datasets_counted = false;
  m.datasets = 0;
  BOOST_TEST(describe_host_memory(m) ==
             "19.50 MiB + the datasets (streaming memory 1.00 MiB, device memory 2.00 MiB, host "
             "buffers 512.00 KiB, overhead 16.00 MiB)");
  BOOST_TEST(host_memory_problem(m, AvailableMemory{1ull << 20, "POPKIT_HOST_MEMORY"}) ==
             "the run needs 19.50 MiB of host memory besides its datasets (streaming memory 1.00 "
             "MiB, device memory 2.00 MiB, host buffers 512.00 KiB, overhead 16.00 MiB) but this "
             "machine has 1.00 MiB available (POPKIT_HOST_MEMORY)");
}

BOOST_AUTO_TEST_CASE(popkit_host_memory_overrides_the_machine) {
  {
    const ScopedEnv env("POPKIT_HOST_MEMORY", "64MiB");
    const auto have = available_host_memory();
    BOOST_REQUIRE(have);
    BOOST_TEST(have->bytes == 64ull << 20);
    BOOST_TEST(have->source == "POPKIT_HOST_MEMORY");
  }
  {
    const ScopedEnv env("POPKIT_HOST_MEMORY", "lots");
    std::string why;
    try {
      available_host_memory();
    } catch (const Error& e) {
      why = e.what();
    }
    BOOST_TEST(why.rfind("POPKIT_HOST_MEMORY: 'lots' is not a byte size: ", 0) == 0, why);
  }
  // Without it: this machine's MemAvailable (or its cgroup's limit), never zero.
  const ScopedEnv env("POPKIT_HOST_MEMORY", "");
  const auto have = available_host_memory();
  BOOST_REQUIRE(have);
  BOOST_TEST(have->bytes > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
