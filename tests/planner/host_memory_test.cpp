// The host memory estimate on a model small enough to count by hand, sums that
// saturate instead of wrapping, the messages, and POPKIT_HOST_MEMORY.
#include "planner/host_memory.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <limits>

#include "base/error.h"
#include "configs.h"
#include "planner/build.h"
#include "planner/device_layout.h"
#include "planner/operands.h"
#include "planner/rank_messages.h"

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
  // Text: windows of 8 input and 8 target bytes cut from a 2,000-byte file, which
  // training keeps (its epochs shift the windows through it) and which is held twice
  // while a split is cut (as read, and as the corpus).
  config::Config text = c;
  text.data.dataset = config::Dataset::kText;
  BOOST_TEST(estimate_host_memory(plan, &eval, text,
                                  {DatasetSize{100, 8, 8, 2000}, DatasetSize{10, 8, 8, 2000}})
                 .datasets == 1600u + 160u + 4000u + 2000u);
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

// Over MPI ranks each holds its share of the replicas, OpenMPI and its messages besides,
// and the rest whole; rank 0 the run file's JSON.
BOOST_AUTO_TEST_CASE(a_rank_holds_its_share_of_the_replicas) {
  const config::Config c = test::mnist_phased();  // R = 2, weights and state remote
  const Plan plan = build_plan(c);
  const Plan eval = build_plan(c, Program::kEval);
  const DatasetSizes data{DatasetSize{1000, 784}, DatasetSize{100, 784}};
  const HostMemory one = estimate_host_memory(plan, &eval, c, data);
  // popplan's figure: one process, every replica.
  BOOST_TEST((estimate_host_memory(plan, &eval, c, {}) == plan.host_memory));
  const auto rank_of = [&](bool writer, std::int64_t on_host) {
    return estimate_host_memory(plan, &eval, c, data, HostUse::kTrain,
                                ProcessShare{2, writer, true, on_host});
  };
  const HostMemory rank = rank_of(false, 2), writer = rank_of(true, 2);
  BOOST_TEST(rank.streaming == plan.streaming_bytes + eval.streaming_bytes);
  BOOST_TEST(rank.device == device_block_bytes(plan) + device_block_bytes(eval));
  BOOST_TEST(rank.datasets == one.datasets);  // every rank loads both sets
  const RankMessages messages = rank_messages(plan, 2);
  const auto bookkeeping = [](const Plan& p) {
    return kDeviceBytes + 8 * p.tensors.size() + kPhaseSampleBytes * p.phases.size();
  };
  BOOST_TEST(rank.overhead == kProcessBytes + kMpiProcessBytes + kMpiPeerBytes + bookkeeping(plan) +
                                  bookkeeping(eval) + messages.pieces * kMpiPieceBytes +
                                  messages.receive_bytes);
  // Rank 0 writes every replica's measured memory as JSON; the others hold the samples.
  BOOST_TEST(writer.host_buffers >= rank.host_buffers);
  BOOST_TEST(writer.overhead == rank.overhead);
  // Two ranks on this host: both; one: rank 0's (it may be the one), one peer fewer.
  BOOST_TEST(RanksMemory({rank, writer, 2}).total() == writer.total() + rank.total());
  const HostMemory alone = rank_of(true, 1);
  BOOST_TEST(RanksMemory({rank_of(false, 1), alone, 1}).total() == alone.total());
  BOOST_TEST(alone.overhead + kMpiPeerBytes == writer.overhead);
  // A rank on a host of its own needs less than one process holding both replicas: the
  // figure each rank was checked by before, which refused such runs.
  BOOST_TEST(alone.total() < one.total());
}

// Rank k's pieces in a collective, per group of G members of which h are on rank k,
// with c non-empty pieces, c_k of them owned on rank k: (c - c_k) h + c_k (G - h).
BOOST_AUTO_TEST_CASE(rank_messages_counted_by_hand) {
  config::Config c = test::mnist_phased();
  c.replication.factor = 4;
  c.replication.groupings = {{"everyone", 4, 1}};
  const Plan plan = build_plan(c);
  // Every tensor has at least 4 elements: every member owns a piece.
  BOOST_TEST(rank_messages(plan, 2).pieces == 2u * 2u + 2u * 2u);  // G 4, h 2, c 4, c_k 2
  BOOST_TEST(rank_messages(plan, 4).pieces == 3u * 1u + 1u * 3u);  // h 1, c_k 1
  // The largest piece's terms from the members elsewhere: 2 pieces x 2 members over 2
  // ranks, 1 x 3 over 4.
  BOOST_REQUIRE(rank_messages(plan, 2).receive_bytes > 0u);
  BOOST_TEST(rank_messages(plan, 4).receive_bytes * 4 == rank_messages(plan, 2).receive_bytes * 3);
  // One process sends nothing; nor do ranks that do not divide R (refused before this).
  BOOST_TEST(rank_messages(plan, 1).pieces == 0u);
  BOOST_TEST(rank_messages(plan, 3).pieces == 0u);
}

// An all-gather's shard is the same for every member: it crosses to a rank once, to be
// copied there. Rank k receives c - c_k shards and sends c_k to each of the P - 1 other
// ranks; the shards it receives land in the receive area.
BOOST_AUTO_TEST_CASE(an_all_gathers_shard_crosses_to_a_rank_once) {
  config::Config c = test::mnist_phased();
  c.replication.factor = 4;
  c.replication.groupings = {{"everyone", 4, 1}};
  const Plan eval = build_plan(c, Program::kEval);  // no gradients: only all-gathers
  std::uint64_t shard_bytes = 0;
  for (const Phase& phase : eval.phases)
    for (const Op& op : phase.ops) {
      BOOST_TEST((op.kind != OpKind::kAllReduce && op.kind != OpKind::kReduceScatter));
      if (op.kind == OpKind::kAllGather)
        shard_bytes =
            std::max(shard_bytes,
                     eval.tensors[static_cast<std::size_t>(op.inputs[shard_operand::kSrc])].nbytes);
    }
  BOOST_REQUIRE(shard_bytes > 0u);
  BOOST_TEST(rank_messages(eval, 2).pieces == 2u + 2u * 1u);  // c 4, c_k 2, P 2
  BOOST_TEST(rank_messages(eval, 4).pieces == 3u + 1u * 3u);  // c_k 1, P 4
  BOOST_TEST(rank_messages(eval, 2).receive_bytes == 2u * shard_bytes);
  BOOST_TEST(rank_messages(eval, 4).receive_bytes == 3u * shard_bytes);
}

BOOST_AUTO_TEST_CASE(the_ranks_message_names_a_rank_and_the_host) {
  HostMemory rank;
  rank.datasets = 1ull << 20;
  rank.overhead = 15ull << 20;
  HostMemory writer = rank;
  writer.host_buffers = 1ull << 20;
  const RanksMemory need{rank, writer, 4};
  BOOST_TEST(need.total() == 65ull << 20);
  BOOST_TEST(ranks_memory_problem(need, AvailableMemory{64ull << 20, "POPKIT_HOST_MEMORY"}) ==
             "the 4 ranks on this host need 65.00 MiB of host memory: 16.00 MiB a rank "
             "(datasets 1.00 MiB, streaming memory 0 B, device memory 0 B, host buffers 0 B, "
             "overhead 15.00 MiB) and rank 0 1.00 MiB more for the run file, but this machine "
             "has 64.00 MiB available (POPKIT_HOST_MEMORY)");
  BOOST_TEST(ranks_memory_problem(need, AvailableMemory{65ull << 20, "x"}).empty());
  BOOST_TEST(ranks_memory_problem(need, std::nullopt).empty());
  BOOST_TEST(ranks_memory_problem({rank, writer, 1}, AvailableMemory{1, "x"}) ==
             "the run's rank on this host needs 17.00 MiB of host memory (datasets 1.00 MiB, "
             "streaming memory 0 B, device memory 0 B, host buffers 1.00 MiB, overhead 15.00 "
             "MiB) but this machine has 1 B available (x)");
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
