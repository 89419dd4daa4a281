// Collectives on tiny tensors with exact results (padding, groupings with stride, byte
// counts), the remote store's addressing, the memory account and sampler, the pools.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cfloat>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config/error.h"
#include "engine/runtime/collectives.h"
#include "engine/runtime/float_mode.h"
#include "engine/runtime/memory_account.h"
#include "engine/runtime/remote_store.h"
#include "engine/runtime/thread_pool.h"

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
  c->all_reduce({4, 2, 1}, ReduceOp::kMean, t.buffers());  // G = 2: 2 (G-1) 24 bytes / G
  BOOST_TEST(c->bytes(0).sent == 24u);
  BOOST_TEST(c->bytes(3).received == 24u);
  PerReplica one = filled(4, 6, 1.0f);
  c->all_reduce({4, 1, 1}, ReduceOp::kMean, one.buffers());  // groups of one move nothing
  BOOST_TEST(c->bytes(0).sent == 24u);
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
