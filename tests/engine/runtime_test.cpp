// Collectives on tiny tensors with exact results (padding, groupings with stride, byte
// counts), the remote store's addressing, the memory account and sampler, the pools.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/runtime/collectives.h"
#include "engine/runtime/float_mode.h"
#include "engine/runtime/memory_account.h"
#include "engine/runtime/remote_store.h"
#include "engine/runtime/thread_pool.h"
#include "tests/support/allocation_counter.h"

using namespace popkit::engine;
using popkit::planner::RemoteBuffer;
using popkit::planner::ReplicaGrouping;

namespace {

// One float vector per replica and the ReplicaBuffers that point at them.
struct PerReplica {
  std::vector<std::vector<float>> values;
  std::vector<ReplicaBuffer> buffers() {
    std::vector<ReplicaBuffer> out;
    for (std::size_t r = 0; r < values.size(); ++r)
      out.push_back({static_cast<std::int64_t>(r), reinterpret_cast<std::byte*>(values[r].data()),
                     static_cast<std::int64_t>(values[r].size()), DType::kFloat32});
    return out;
  }
};

PerReplica filled(std::int64_t r_count, std::int64_t n, float fill = -7.0f) {
  return {std::vector<std::vector<float>>(static_cast<std::size_t>(r_count),
                                          std::vector<float>(static_cast<std::size_t>(n), fill))};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(collectives)

BOOST_AUTO_TEST_CASE(all_reduce_within_contiguous_groups) {
  auto c = make_in_process_collectives(4);
  PerReplica t{{{1, 2}, {3, 4}, {10, 20}, {30, 50}}};
  c->all_reduce({4, 2, 1}, ReduceOp::kMean, t.buffers());  // groups {0,1} {2,3}
  BOOST_TEST(t.values[0] == (std::vector<float>{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(t.values[1] == (std::vector<float>{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(t.values[2] == (std::vector<float>{20, 35}), boost::test_tools::per_element());
  BOOST_TEST(t.values[3] == (std::vector<float>{20, 35}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(all_reduce_sum_with_stride) {
  auto c = make_in_process_collectives(4);
  PerReplica t{{{1}, {2}, {4}, {8}}};
  c->all_reduce({4, 2, 2}, ReduceOp::kSum, t.buffers());  // groups {0,2} {1,3}
  BOOST_TEST(t.values[0][0] == 5.0f);
  BOOST_TEST(t.values[2][0] == 5.0f);
  BOOST_TEST(t.values[1][0] == 10.0f);
  BOOST_TEST(t.values[3][0] == 10.0f);
}

BOOST_AUTO_TEST_CASE(sum_runs_in_replica_order) {
  // x = {1, 1e8, -1e8}: in replica order (1 + 1e8) + -1e8 = 1e8 - 1e8 = 0 in float (1 is
  // lost in 1e8's rounding); reversed, (-1e8 + 1e8) + 1 = 1. Only replica order gives 0,
  // in all_reduce and in reduce_scatter alike, whichever thread runs which replica.
  const std::vector<float> x{1.0f, 1e8f, -1e8f};
  volatile float x0 = x[0], x1 = x[1], x2 = x[2];  // no constant folding of the sanity check
  BOOST_REQUIRE((x0 + x1) + x2 == 0.0f);
  BOOST_REQUIRE((x2 + x1) + x0 == 1.0f);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    auto c = make_in_process_collectives(3, &pool);
    PerReplica t{{{x[0], x[0]}, {x[1], x[1]}, {x[2], x[2]}}};
    c->all_reduce({3, 3, 1}, ReduceOp::kSum, t.buffers());
    for (const auto& v : t.values) BOOST_TEST(v == (std::vector<float>{0.0f, 0.0f}));
    PerReplica full{{{x[0], x[0], x[0]}, {x[1], x[1], x[1]}, {x[2], x[2], x[2]}}};
    PerReplica shard = filled(3, 1);
    c->reduce_scatter({3, 3, 1}, {3, 3, 1}, ReduceOp::kSum, full.buffers(), shard.buffers());
    for (const auto& v : shard.values) BOOST_TEST(v[0] == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(bookkeeping_grows_with_replicas_not_their_square) {
  // R = 1024 replicas in one group, a tensor of R elements: every pair of replicas moves
  // one element. What a call allocates besides the tensors must be O(R), at most 1 KiB a
  // replica; a list of the R x R pairs (copies, terms) was 24 to 48 KiB a replica.
  constexpr std::int64_t kR = 1024;
  const ReplicaGrouping everyone{kR, kR, 1};
  auto c = make_in_process_collectives(kR);
  PerReplica full = filled(kR, kR, 1.0f);
  PerReplica shard = filled(kR, 1, 1.0f);
  auto full_buffers = full.buffers();
  auto shard_buffers = shard.buffers();
  const auto gather = popkit::test::count_allocations(
      [&] { c->all_gather(everyone, shard_buffers, full_buffers); });
  BOOST_TEST(gather.bytes <= std::uint64_t{kR} * 1024);
  const auto reduce = popkit::test::count_allocations(
      [&] { c->all_reduce(everyone, ReduceOp::kSum, full_buffers); });
  BOOST_TEST(reduce.bytes <= std::uint64_t{kR} * 1024);
  BOOST_TEST(full.values[5][7] == static_cast<float>(kR));
  const auto scatter = popkit::test::count_allocations(
      [&] { c->reduce_scatter(everyone, everyone, ReduceOp::kSum, full_buffers, shard_buffers); });
  BOOST_TEST(scatter.bytes <= std::uint64_t{kR} * 1024);
  BOOST_TEST(shard.values[3][0] == static_cast<float>(kR * kR));
}

BOOST_AUTO_TEST_CASE(reduce_scatter_pads_the_last_shard) {
  // 5 elements over 2 ranks: shard_size 3, rank 1 holds [3, 5) and one zero.
  auto c = make_in_process_collectives(2);
  PerReplica src{{{1, 2, 3, 4, 5}, {3, 4, 5, 6, 7}}};
  auto dst = filled(2, 3);
  c->reduce_scatter({2, 2, 1}, {2, 2, 1}, ReduceOp::kMean, src.buffers(), dst.buffers());
  BOOST_TEST(dst.values[0] == (std::vector<float>{2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(dst.values[1] == (std::vector<float>{5, 6, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(reduce_scatter_with_stride_grouping) {
  // R = 4, groups {0,2} and {1,3}; rank of 0 and 1 is 0, of 2 and 3 is 1.
  auto c = make_in_process_collectives(4);
  PerReplica src{{{1, 2, 3}, {10, 20, 30}, {3, 4, 5}, {30, 40, 50}}};
  auto dst = filled(4, 2);
  const ReplicaGrouping g{4, 2, 2};
  c->reduce_scatter(g, g, ReduceOp::kSum, src.buffers(), dst.buffers());
  BOOST_TEST(dst.values[0] == (std::vector<float>{4, 6}), boost::test_tools::per_element());
  BOOST_TEST(dst.values[2] == (std::vector<float>{8, 0}), boost::test_tools::per_element());
  BOOST_TEST(dst.values[1] == (std::vector<float>{40, 60}), boost::test_tools::per_element());
  BOOST_TEST(dst.values[3] == (std::vector<float>{80, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(all_gather_truncates_to_the_meta_shape) {
  auto c = make_in_process_collectives(4);
  PerReplica src{{{1, 2, 3}, {7, 8, 9}, {4, 5, 0}, {10, 11, 0}}};
  auto dst = filled(4, 5);
  c->all_gather({4, 2, 2}, src.buffers(), dst.buffers());  // groups {0,2} {1,3}
  BOOST_TEST(dst.values[0] == (std::vector<float>{1, 2, 3, 4, 5}),
             boost::test_tools::per_element());
  BOOST_TEST(dst.values[2] == (std::vector<float>{1, 2, 3, 4, 5}),
             boost::test_tools::per_element());
  BOOST_TEST(dst.values[1] == (std::vector<float>{7, 8, 9, 10, 11}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(slice_shard_takes_own_slice) {
  auto c = make_in_process_collectives(3);
  PerReplica src{{{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}};
  auto dst = filled(3, 2);
  c->slice_shard({3, 3, 1}, src.buffers(), dst.buffers());
  BOOST_TEST(dst.values[0] == (std::vector<float>{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(dst.values[1] == (std::vector<float>{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(dst.values[2] == (std::vector<float>{0, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bytes_are_counted_per_replica) {
  auto c = make_in_process_collectives(4);
  PerReplica t = filled(4, 6, 1.0f);
  c->all_reduce({4, 2, 1}, ReduceOp::kMean, t.buffers());  // G = 2: 12 bytes each way twice
  BOOST_TEST(c->bytes(0).sent == 24u);
  BOOST_TEST(c->bytes(3).received == 24u);
  PerReplica one = filled(4, 6, 1.0f);
  c->all_reduce({4, 1, 1}, ReduceOp::kMean, one.buffers());  // groups of one move nothing
  BOOST_TEST(c->bytes(0).sent == 24u);
  PerReplica shard = filled(4, 6, 1.0f);
  auto full = filled(4, 6);
  c->all_gather({4, 1, 1}, shard.buffers(), full.buffers());  // a local copy
  c->slice_shard({4, 2, 1}, full.buffers(), filled(4, 3).buffers());
  BOOST_TEST(c->bytes(0).sent == 24u);
  BOOST_TEST(c->bytes(0).received == 24u);
}

// The bytes each replica sent and received, in replica order.
struct Moved {
  std::vector<std::uint64_t> sent, received;
};

Moved moved_by(const Collectives& c, std::int64_t replicas) {
  Moved m;
  for (std::int64_t r = 0; r < replicas; ++r) {
    m.sent.push_back(c.bytes(r).sent);
    m.received.push_back(c.bytes(r).received);
  }
  return m;
}

// x[r][i] = r + i / 8: every replica and element different, sums exact in float.
PerReplica ramp(std::int64_t replicas, std::int64_t n) {
  PerReplica t = filled(replicas, n);
  for (std::size_t r = 0; r < t.values.size(); ++r)
    for (std::size_t i = 0; i < t.values[r].size(); ++i)
      t.values[r][i] = static_cast<float>(r) + static_cast<float>(i) / 8.0f;
  return t;
}

using U = std::vector<std::uint64_t>;

BOOST_AUTO_TEST_CASE(owner_chunks_differ_by_one_element_at_most) {
  // (first, n) per rank. 10 over 4: 3 3 2 2; 3 over 4: 1 1 1 0; 8 over 4: 2 each.
  const auto chunks = [](std::int64_t n, std::int64_t g) {
    std::vector<std::int64_t> out;
    for (std::int64_t k = 0; k < g; ++k) {
      const OwnerChunk c = owner_chunk(n, g, k);
      out.insert(out.end(), {c.first, c.n});
    }
    return out;
  };
  using I = std::vector<std::int64_t>;
  BOOST_TEST(chunks(10, 4) == (I{0, 3, 3, 3, 6, 2, 8, 2}), boost::test_tools::per_element());
  BOOST_TEST(chunks(3, 4) == (I{0, 1, 1, 1, 2, 1, 3, 0}), boost::test_tools::per_element());
  BOOST_TEST(chunks(8, 4) == (I{0, 2, 2, 2, 4, 2, 6, 2}), boost::test_tools::per_element());
}

// all_reduce over owner chunks of s_k bytes of an n-byte tensor: member k receives its
// chunk from G-1 others and sends them the result, and sends every other chunk to its
// owner and receives the result: sent = received = (n - s_k) + (G-1) s_k.
BOOST_AUTO_TEST_CASE(all_reduce_moves_each_owner_chunk_in_and_out) {
  {
    // G = 3, 10 floats: chunks of 4 3 3 elements, 16 12 12 bytes; 40 + s_k.
    auto c = make_in_process_collectives(3);
    PerReplica t = ramp(3, 10);
    c->all_reduce({3, 3, 1}, ReduceOp::kSum, t.buffers());
    const Moved m = moved_by(*c, 3);
    BOOST_TEST(m.sent == (U{56, 52, 52}), boost::test_tools::per_element());
    BOOST_TEST(m.received == (U{56, 52, 52}), boost::test_tools::per_element());
    for (const auto& v : t.values)
      for (std::size_t i = 0; i < v.size(); ++i)
        BOOST_TEST(v[i] == 3.0f + 3.0f * static_cast<float>(i) / 8.0f);
  }
  {
    // G = 4, 10 floats: 12 12 8 8 bytes; 40 + 2 s_k.
    auto c = make_in_process_collectives(4);
    PerReplica t = ramp(4, 10);
    c->all_reduce({4, 4, 1}, ReduceOp::kSum, t.buffers());
    const Moved m = moved_by(*c, 4);
    BOOST_TEST(m.sent == (U{64, 64, 56, 56}), boost::test_tools::per_element());
    BOOST_TEST(m.received == (U{64, 64, 56, 56}), boost::test_tools::per_element());
  }
  {
    // G = 4, 3 floats: 4 4 4 0 bytes, the last member owns nothing; 12 + 2 s_k.
    auto c = make_in_process_collectives(4);
    PerReplica t = ramp(4, 3);
    c->all_reduce({4, 4, 1}, ReduceOp::kMean, t.buffers());
    const Moved m = moved_by(*c, 4);
    BOOST_TEST(m.sent == (U{20, 20, 20, 12}), boost::test_tools::per_element());
    BOOST_TEST(m.received == (U{20, 20, 20, 12}), boost::test_tools::per_element());
    for (const auto& v : t.values)
      BOOST_TEST(v == (std::vector<float>{1.5f, 1.625f, 1.75f}), boost::test_tools::per_element());
  }
  {
    // G = 2 with stride, groups {0,2} {1,3}, 5 floats: 12 and 8 bytes; always n = 20.
    auto c = make_in_process_collectives(4);
    PerReplica t = ramp(4, 5);
    c->all_reduce({4, 2, 2}, ReduceOp::kSum, t.buffers());
    const Moved m = moved_by(*c, 4);
    BOOST_TEST(m.sent == (U{20, 20, 20, 20}), boost::test_tools::per_element());
    BOOST_TEST(m.received == (U{20, 20, 20, 20}), boost::test_tools::per_element());
    BOOST_TEST(t.values[2][4] == 2.0f + 2 * 0.5f);
    BOOST_TEST(t.values[3][4] == 4.0f + 2 * 0.5f);
  }
}

// reduce_scatter: the member holding slice k receives it (a_k bytes inside the tensor)
// from the other G-1, and sends every other member its slice.
BOOST_AUTO_TEST_CASE(reduce_scatter_moves_each_slice_to_its_holder) {
  {
    // G = S = 3, 10 floats, shards of 4: slices of 16 16 8 bytes (2 zeros of padding).
    // received = 2 a_k, sent = 40 - a_k.
    auto c = make_in_process_collectives(3);
    PerReplica src = ramp(3, 10);
    auto dst = filled(3, 4);
    c->reduce_scatter({3, 3, 1}, {3, 3, 1}, ReduceOp::kSum, src.buffers(), dst.buffers());
    const Moved m = moved_by(*c, 3);
    BOOST_TEST(m.received == (U{32, 32, 16}), boost::test_tools::per_element());
    BOOST_TEST(m.sent == (U{24, 24, 32}), boost::test_tools::per_element());
    BOOST_TEST(dst.values[2] == (std::vector<float>{6, 6.375f, 0, 0}),
               boost::test_tools::per_element());
  }
  {
    // Reduced over G = 4, sharded over S = 2 with stride (shard groups {0,2} {1,3}: rank 0
    // for replicas 0 and 1, rank 1 for 2 and 3), 5 floats, shards of 3: slices of 12 and 8
    // bytes. received = 3 a_k; sent = (12 + 12 + 8 + 8) - a_k.
    auto c = make_in_process_collectives(4);
    PerReplica src = ramp(4, 5);
    auto dst = filled(4, 3);
    c->reduce_scatter({4, 4, 1}, {4, 2, 2}, ReduceOp::kSum, src.buffers(), dst.buffers());
    const Moved m = moved_by(*c, 4);
    BOOST_TEST(m.received == (U{36, 36, 24, 24}), boost::test_tools::per_element());
    BOOST_TEST(m.sent == (U{28, 28, 32, 32}), boost::test_tools::per_element());
    BOOST_TEST(dst.values[1] == (std::vector<float>{6, 6.5f, 7}), boost::test_tools::per_element());
    BOOST_TEST(dst.values[3] == (std::vector<float>{7.5f, 8, 0}), boost::test_tools::per_element());
  }
}

// all_gather: each member's shard (a_k bytes inside the destination) goes to the other
// G-1: sent = (G-1) a_k, received = n - a_k.
BOOST_AUTO_TEST_CASE(all_gather_moves_each_shard_to_the_others) {
  {
    // G = 3, 10 floats from shards of 4: 16 16 8 bytes.
    auto c = make_in_process_collectives(3);
    PerReplica src = ramp(3, 4);
    auto dst = filled(3, 10);
    c->all_gather({3, 3, 1}, src.buffers(), dst.buffers());
    const Moved m = moved_by(*c, 3);
    BOOST_TEST(m.sent == (U{32, 32, 16}), boost::test_tools::per_element());
    BOOST_TEST(m.received == (U{24, 24, 32}), boost::test_tools::per_element());
    BOOST_TEST(dst.values[1][9] == 2.125f);
  }
  {
    // G = 4, 5 floats from shards of 2: 8 8 4 0 bytes; the last shard is all padding.
    auto c = make_in_process_collectives(4);
    PerReplica src = ramp(4, 2);
    auto dst = filled(4, 5);
    c->all_gather({4, 4, 1}, src.buffers(), dst.buffers());
    const Moved m = moved_by(*c, 4);
    BOOST_TEST(m.sent == (U{24, 24, 12, 0}), boost::test_tools::per_element());
    BOOST_TEST(m.received == (U{12, 12, 16, 20}), boost::test_tools::per_element());
  }
  {
    // G = 2 with stride, groups {0,2} {1,3}, 5 floats from shards of 3: 12 and 8 bytes.
    auto c = make_in_process_collectives(4);
    PerReplica src = ramp(4, 3);
    auto dst = filled(4, 5);
    c->all_gather({4, 2, 2}, src.buffers(), dst.buffers());
    const Moved m = moved_by(*c, 4);
    BOOST_TEST(m.sent == (U{12, 12, 8, 8}), boost::test_tools::per_element());
    BOOST_TEST(m.received == (U{8, 8, 12, 12}), boost::test_tools::per_element());
  }
}

// Tensors of several 64 KiB pieces: the same values (replica order) and the same counts on
// one thread and on three.
BOOST_AUTO_TEST_CASE(pieces_on_the_pool_give_the_same_values_and_bytes) {
  constexpr std::int64_t kN = 3 * 16384 + 5;  // owner chunks of 16386 16386 16385 floats
  std::vector<float> want(static_cast<std::size_t>(kN));
  const PerReplica x = ramp(3, kN);
  for (std::size_t i = 0; i < want.size(); ++i) {
    float s = x.values[0][i];
    s += x.values[1][i];
    s += x.values[2][i];
    want[i] = s / 3.0f;
  }
  const std::uint64_t s0 = 16386 * 4, s2 = 16385 * 4, n = kN * 4;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    auto c = make_in_process_collectives(3, &pool);
    PerReplica t = x;
    c->all_reduce({3, 3, 1}, ReduceOp::kMean, t.buffers());
    for (const auto& v : t.values) BOOST_TEST(v == want);
    const Moved m = moved_by(*c, 3);
    BOOST_TEST(m.sent == (U{n + s0, n + s0, n + s2}), boost::test_tools::per_element());
    BOOST_TEST(m.received == m.sent, boost::test_tools::per_element());
  }
}

// Sums of a few elements each (a shard or an owner's chunk of a small tensor over many
// replicas) are summed together with their neighbours in the group: each element is still
// the sum of its group's members in replica order, bit for bit, over contiguous groups and
// groups with stride, with padding, on one thread and on several.
BOOST_AUTO_TEST_CASE(small_sums_side_by_side_give_each_elements_sum_in_replica_order) {
  constexpr std::int64_t kR = 64, kN = 197;
  PerReplica x = filled(kR, kN);
  for (std::int64_t r = 0; r < kR; ++r)  // magnitudes 1e-3 to 1e3: the order shows in the bits
    for (std::int64_t i = 0; i < kN; ++i)
      x.values[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] =
          static_cast<float>((r * 7919 + i * 104729) % 1000 - 500) *
          std::pow(10.0f, static_cast<float>((r + i) % 7 - 3));
  const auto reference = [&](const ReplicaGrouping& g, std::int64_t replica, std::int64_t i,
                             ReduceOp op) {
    float sum = 0.0f;
    bool first = true;
    for (std::int64_t m = 0; m < kR; ++m) {
      if (g.group_of(m) != g.group_of(replica)) continue;
      const float v = x.values[static_cast<std::size_t>(m)][static_cast<std::size_t>(i)];
      sum = first ? v : sum + v;
      first = false;
    }
    return op == ReduceOp::kMean ? sum / static_cast<float>(g.group_size) : sum;
  };
  for (const ReplicaGrouping g :
       {ReplicaGrouping{kR, kR, 1}, ReplicaGrouping{kR, 16, 1}, ReplicaGrouping{kR, 16, 4}}) {
    for (const int threads : {1, 3}) {
      ThreadPool pool(threads);
      auto c = make_in_process_collectives(kR, &pool);
      for (const ReduceOp op : {ReduceOp::kMean, ReduceOp::kSum}) {
        PerReplica t = x;
        c->all_reduce(g, op, t.buffers());
        int wrong = 0;
        for (std::int64_t r = 0; r < kR; ++r)
          for (std::int64_t i = 0; i < kN; ++i)
            wrong += t.values[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] !=
                     reference(g, r, i, op);
        BOOST_TEST(wrong == 0, "all_reduce over groups of " << g.group_size << ", stride "
                                                            << g.stride << ", " << threads
                                                            << " thread(s)");
        const std::int64_t shard_n = (kN + g.group_size - 1) / g.group_size;
        PerReplica shard = filled(kR, shard_n);
        c->reduce_scatter(g, g, op, x.buffers(), shard.buffers());
        wrong = 0;
        for (std::int64_t r = 0; r < kR; ++r)
          for (std::int64_t j = 0; j < shard_n; ++j) {
            const std::int64_t i = g.rank_in_group(r) * shard_n + j;
            const float want = i < kN ? reference(g, r, i, op) : 0.0f;  // padding: zero
            wrong += shard.values[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)] != want;
          }
        BOOST_TEST(wrong == 0, "reduce_scatter over groups of " << g.group_size << ", stride "
                                                                << g.stride << ", " << threads
                                                                << " thread(s)");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(mismatched_sizes_are_an_error) {
  auto c = make_in_process_collectives(2);
  PerReplica t{{{1, 2}, {1}}};
  BOOST_CHECK_EXCEPTION(c->all_reduce({2, 2, 1}, ReduceOp::kSum, t.buffers()), popkit::Error,
                        [](const popkit::Error& e) {
                          return std::string(e.what()) ==
                                 "all_reduce: replica 1 gives 1 elements but replica 0 gives 2";
                        });
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(runtime)

namespace {
// Half of FLT_MIN: subnormal, or 0 where the thread flushes. volatile: computed at run
// time, in the thread's mode, not folded by the compiler.
float half_of_flt_min() {
  volatile float tiny = FLT_MIN;
  volatile float half = 0.5f;
  return tiny * half;
}
}  // namespace

// Every position (the vectorised body and the tail), every kind of non-finite value, and
// the finite extremes, which must pass.
BOOST_AUTO_TEST_CASE(any_non_finite_finds_nan_and_inf_anywhere) {
  const float finite[] = {0.0f, -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, FLT_TRUE_MIN, 1.0f};
  const float bad[] = {
      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (const std::int64_t n : {1, 7, 16, 37, 1000}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) x[i] = finite[i % 7];
    BOOST_TEST(!any_non_finite(x.data(), n));
    for (const float b : bad)
      for (const std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
        const float kept = x[at];
        x[at] = b;
        BOOST_TEST(any_non_finite(x.data(), n), "n " << n << ", at " << at << ": " << b);
        x[at] = kept;
      }
  }
}

BOOST_AUTO_TEST_CASE(flush_denormals_sets_ftz_daz_for_a_scope_and_restores) {
  BOOST_REQUIRE(!denormals_flushed());  // a new thread's default
  BOOST_TEST(half_of_flt_min() > 0.0f);
  {
    const FlushDenormals mode;
    BOOST_TEST(denormals_flushed());
    BOOST_TEST(half_of_flt_min() == 0.0f);
  }
  BOOST_TEST(!denormals_flushed());
  BOOST_TEST(half_of_flt_min() > 0.0f);
}

BOOST_AUTO_TEST_CASE(pool_and_io_threads_flush_denormals) {
  // The pool's own threads flush always; its caller flushes inside the engine's scope.
  ThreadPool pool(3);
  std::mutex mu;
  std::vector<std::pair<std::thread::id, float>> seen;
  const auto record = [&](std::int64_t) {
    const float r = half_of_flt_min();
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // let every thread take some
    const std::lock_guard lock(mu);
    seen.emplace_back(std::this_thread::get_id(), r);
  };
  pool.run(64, record);
  std::size_t by_workers = 0;
  for (const auto& [id, r] : seen) {
    if (id == std::this_thread::get_id()) {
      BOOST_TEST(r > 0.0f);  // the caller outside the scope: not flushed
    } else {
      BOOST_TEST(r == 0.0f);
      ++by_workers;
    }
  }
  BOOST_TEST(by_workers > 0u);
  seen.clear();
  {
    const FlushDenormals mode;
    pool.run(64, record);
  }
  for (const auto& [id, r] : seen) BOOST_TEST(r == 0.0f);

  IoQueue io(1);
  std::atomic<bool> io_flushed{false};
  std::atomic<bool> on_io_thread{false};
  const std::thread::id caller = std::this_thread::get_id();
  const std::function<void(std::int64_t)> piece = [&](std::int64_t) {
    on_io_thread = std::this_thread::get_id() != caller;
    io_flushed = denormals_flushed();
  };
  // The queue's thread takes a piece at once (it polls); retry if the caller ran it.
  for (int attempt = 0; attempt < 100 && !on_io_thread; ++attempt) {
    io.post(0, piece, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    io.wait(0);
  }
  BOOST_REQUIRE(on_io_thread.load());
  BOOST_TEST(io_flushed.load());
}

BOOST_AUTO_TEST_CASE(remote_store_batch_serial_addressing) {
  std::vector<RemoteBuffer> buffers(1);
  buffers[0].name = "x";
  buffers[0].cls = popkit::planner::TensorClass::kActivations;
  buffers[0].rows = 2;
  buffers[0].steps = 3;
  buffers[0].entry_bytes = 4;
  RemoteStore store(buffers);
  BOOST_TEST(store.account().bytes == 24u);
  BOOST_TEST(store.account()
                 .by_class[static_cast<std::size_t>(popkit::planner::TensorClass::kActivations)] ==
             24u);
  for (std::int64_t row = 0; row < 2; ++row)
    for (std::int64_t step = 0; step < 3; ++step) {
      const float v = static_cast<float>(row * 10 + step);
      store.store(0, row * 3 + step, reinterpret_cast<const std::byte*>(&v),
                  4);  // entry = row * steps + step
    }
  float out = 0;
  store.load(0, 1 * 3 + 2, reinterpret_cast<std::byte*>(&out), 4);
  BOOST_TEST(out == 12.0f);
  BOOST_CHECK_EXCEPTION(
      store.load(0, 6, reinterpret_cast<std::byte*>(&out), 4), popkit::Error,
      [](const popkit::Error& e) {
        return std::string(e.what()) ==
               "remote_load: entry 6 of remote buffer 'x' is out of range (2 rows x 3 steps)";
      });
  BOOST_CHECK_EXCEPTION(
      store.load(0, 0, reinterpret_cast<std::byte*>(&out), 8), popkit::Error,
      [](const popkit::Error& e) {
        return std::string(e.what()) ==
               "remote_load: tensor of 8 bytes but remote buffer 'x' has entries of 4 bytes";
      });
}

BOOST_AUTO_TEST_CASE(memory_account_and_sampler) {
  using popkit::planner::TensorClass;
  MemoryAccount a;
  a.allocate(100, TensorClass::kWeights, true);
  PhaseSampler s;
  s.begin(a);
  a.allocate(50, TensorClass::kActivations, false);
  s.sample(a);
  a.allocate(30, TensorClass::kGradAccumulators, false);
  s.sample(a);
  a.release(50, TensorClass::kActivations, false);
  s.sample(a);
  a.allocate(50, TensorClass::kActivations, false);  // reaches the peak again: first one kept
  s.sample(a);
  BOOST_TEST(s.memory().peak == 180u);
  BOOST_TEST(s.memory().always_live == 100u);
  BOOST_TEST(s.memory().not_always_live == 80u);
  BOOST_TEST(s.memory().peak_by_class[static_cast<std::size_t>(TensorClass::kActivations)] == 50u);
  BOOST_TEST(a.peak() == 180u);
  BOOST_TEST(a.live() == 180u);
}

BOOST_AUTO_TEST_CASE(thread_pool_runs_every_task_once) {
  ThreadPool pool(4);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(9);
    pool.run(9, [&](std::int64_t i) { hits[static_cast<std::size_t>(i)].fetch_add(1); });
    for (auto& h : hits) BOOST_TEST(h.load() == 1);
  }
}

BOOST_AUTO_TEST_CASE(thread_pool_reports_the_lowest_failing_task) {
  ThreadPool pool(3);
  BOOST_CHECK_EXCEPTION(pool.run(6,
                                 [](std::int64_t i) {
                                   if (i >= 2)
                                     throw std::runtime_error("task " + std::to_string(i));
                                 }),
                        std::runtime_error, [](const std::runtime_error& e) {
                          return std::string(e.what()) == "task 2";
                        });
  std::atomic<int> n{0};
  pool.run(5, [&](std::int64_t) { n.fetch_add(1); });  // still usable
  BOOST_TEST(n.load() == 5);
}

BOOST_AUTO_TEST_CASE(io_queue_runs_each_piece_once_and_carries_errors) {
  IoQueue io(3);
  std::vector<std::atomic<int>> runs(300);
  const std::function<void(std::int64_t)> count = [&](std::int64_t arg) {
    runs[static_cast<std::size_t>(arg)].fetch_add(1);
  };
  // Slots posted and waited for in an interleaved order: each piece runs exactly once,
  // whether the thread or the waiter takes it.
  for (std::int64_t k = 0; k < 100; ++k) {
    for (std::int64_t slot = 0; slot < 3; ++slot) io.post(slot, count, 3 * k + slot);
    for (std::int64_t slot : {2, 0, 1}) io.wait(slot);
  }
  for (auto& r : runs) BOOST_TEST(r.load() == 1);
  const std::function<void(std::int64_t)> fail = [](std::int64_t arg) {
    if (arg == 1) throw popkit::Error("disk on fire");
  };
  io.post(0, fail, 0);
  io.post(1, fail, 1);
  BOOST_CHECK_THROW(io.wait(1), popkit::Error);
  io.wait(0);  // the other slot's piece is unaffected
  io.post(1, count, 0);
  io.wait(1);  // the error was delivered once
  BOOST_TEST(runs[0].load() == 2);
}

BOOST_AUTO_TEST_SUITE_END()
