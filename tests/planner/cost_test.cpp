// The cost model (planner/cost.h) op by op, on tiny plans whose times are worked out by
// hand from round profile figures: the GEMM efficiency curve, element-wise work, IO tiles
// taken from compute, links shared by replicas, what io_overlapped hides and what it
// does not, preloads, the ops that cost nothing, and a CPU's threads (host_threads).
#include "planner/cost.h"

#include <boost/test/unit_test.hpp>

#include "planner/build.h"
#include "planner/layer_kinds.h"
#include "planner/schedule.h"
#include "planner/workspace.h"
#include "tests/planner/configs.h"

using namespace popkit::planner;
namespace tt = boost::test_tools;

namespace {

// One linear layer 4 -> 3 without activation on a micro-batch of 2 rows. Tensors: 0 the
// input [2, 4], 1 the output [2, 3], 2 an images slot of 32 bytes.
Plan tiny(std::int64_t replicas = 1) {
  Plan p;
  p.replication_factor = replicas;
  p.global_batch_size = 2 * replicas;
  LayerInfo l;
  l.name = "fc";
  l.attributes = {{"out_features", std::int64_t{3}}, {"activation", "none"}};
  l.in_features = 4;
  l.out_features = 3;
  p.layers.push_back(l);
  auto tensor = [&](std::vector<std::int64_t> shape) {
    DeviceTensor t;
    t.shape = shape;
    t.nelms = 1;
    for (auto d : shape) t.nelms *= d;
    t.nbytes = static_cast<std::uint64_t>(t.nelms) * 4;
    p.tensors.push_back(t);
  };
  tensor({2, 4});
  tensor({2, 3});
  tensor({2, 4});
  return p;
}

Op forward() {
  Op op;
  op.kind = OpKind::kForward;
  op.layer = 0;
  op.inputs = {0, -1, -1};
  op.outputs = {1, -1};
  return op;
}

Op load(OpKind kind, int tensor) {
  Op op;
  op.kind = kind;
  op.outputs = {tensor};
  op.buffer = 0;
  op.entry = 0;
  return op;
}

Op repeat(std::vector<Op> body, std::int64_t steps, IoMode mode) {
  Op op;
  op.kind = OpKind::kRepeat;
  op.body = std::move(body);
  op.steps = steps;
  op.io_mode = mode;
  return op;
}

// Round figures: 1 GFLOP/s GEMMs at half efficiency, falling to half again at m = 2;
// 1 GFLOP/s element-wise; 1 GB/s links with 100 ns latency; 1 us per op.
DeviceProfile profile() {
  DeviceProfile d;
  d.name = "round";
  d.tiles = 4;
  d.flops_per_second = 1e9;
  d.gemm_max_efficiency = 0.5;
  d.gemm_half_m = 2;
  d.vector_flops_per_second = 1e9;
  d.ipu_link = {1e9, 1e-7, 1.0, 1.0};
  d.streaming = {1e9, 1e-7, 1.0, 1.0};
  d.host = {1e9, 1e-7, 1.0, 1.0};
  d.op_overhead_seconds = 1e-6;
  return d;
}

double priced(Plan& p, const DeviceProfile& d = profile()) {
  annotate_costs(p);
  estimate_time(p, d);
  return p.estimated_step_seconds;
}

// tiny()'s layer made 512 -> 512 on `rows` rows, its forward the one phase.
Plan wide_forward(std::int64_t rows) {
  Plan p = tiny();
  p.layers[0].in_features = 512;
  p.layers[0].out_features = 512;
  for (const int t : {0, 1}) {
    p.tensors[static_cast<std::size_t>(t)].shape = {rows, 512};
    p.tensors[static_cast<std::size_t>(t)].nelms = rows * 512;
  }
  p.phases.push_back({"fwd", {forward()}, {}, 0.0, -1, {}});
  return p;
}

// The forward: x W, [2, 4] x [4, 3], 48 FLOPs at 1e9 * 0.5 * 2 / (2 + 2); the bias, 6
// FLOPs at 1e9; and the op's overhead.
constexpr double kForward = 1e-6 + 48 / (1e9 * 0.25) + 6 / 1e9;

}  // namespace

BOOST_AUTO_TEST_SUITE(cost)

BOOST_AUTO_TEST_CASE(a_gemm_runs_at_the_rate_of_its_shape) {
  Plan p = tiny();
  p.phases.push_back({"fwd", {forward()}, {}, 0.0, -1, {}});
  BOOST_TEST(priced(p) == kForward, tt::tolerance(1e-12));
  BOOST_TEST(p.phases[0].estimated_seconds == kForward, tt::tolerance(1e-12));
  BOOST_TEST(p.estimated_samples_per_second == 2 / kForward, tt::tolerance(1e-12));
  // Without the fall-off along m the GEMM runs at max_efficiency.
  DeviceProfile flat = profile();
  flat.gemm_half_m = 0;
  BOOST_TEST(priced(p, flat) == 1e-6 + 48 / 0.5e9 + 6 / 1e9, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(io_tiles_are_taken_from_compute) {
  Plan p = tiny();
  p.io_mode = IoMode::kIo;
  p.io_tiles = 1;  // of 4: compute runs on 3
  p.phases.push_back({"fwd", {forward()}, {}, 0.0, -1, {}});
  BOOST_TEST(priced(p) == 1e-6 + (48 / 0.25e9 + 6 / 1e9) * 4 / 3, tt::tolerance(1e-12));
  p.io_mode = IoMode::kCompute;  // io_tiles apply to io modes only
  BOOST_TEST(priced(p) == kForward, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_transfer_pays_sync_latency_and_bytes_over_its_share_of_the_link) {
  Plan p = tiny(4);
  p.phases.push_back({"load", {load(OpKind::kRemoteLoad, 2)}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.sync_overhead_seconds = 2e-6;
  BOOST_TEST(priced(p, d) == 2e-6 + 1e-7 + 32 / 1e9, tt::tolerance(1e-12));
  // Four replicas share one streaming link: each moves its bytes at a quarter of the rate.
  d.streaming.shared_by = 4;
  d.streaming.efficiency = 0.5;
  BOOST_TEST(priced(p, d) == 2e-6 + 1e-7 + 32 / (1e9 * 0.5 / 4), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(the_sync_pattern_prices_a_transfers_sync_and_its_share_of_the_link) {
  // Four replicas on a link shared by four, 2 us per sync.
  Plan p = tiny(4);
  p.phases.push_back({"load", {load(OpKind::kHostLoad, 2)}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.sync_overhead_seconds = 2e-6;
  d.host.shared_by = 4;
  p.sync_pattern = popkit::config::SyncPattern::kFull;
  BOOST_TEST(priced(p, d) == 2e-6 + 1e-7 + 32 / (1e9 / 4), tt::tolerance(1e-12));
  // The ladder sets do not wait for each other, so they alternate: two replicas share the
  // link.
  p.sync_pattern = popkit::config::SyncPattern::kReplicaAndLadder;
  BOOST_TEST(priced(p, d) == 2e-6 + 1e-7 + 32 / (1e9 / 2), tt::tolerance(1e-12));
  // A device streaming on its own waits for no one (single_pipeline).
  Plan one = tiny(1);
  one.phases = p.phases;
  one.sync_pattern = popkit::config::SyncPattern::kSinglePipeline;
  BOOST_TEST(priced(one, d) == 1e-7 + 32 / 1e9, tt::tolerance(1e-12));
  one.sync_pattern = popkit::config::SyncPattern::kFull;
  BOOST_TEST(priced(one, d) == 2e-6 + 1e-7 + 32 / 1e9, tt::tolerance(1e-12));
  // A CPU's threads wait where the schedule says (planner/schedule.h). Under full a
  // segment with transfers meets at a barrier of the threads after each chunk (a run of
  // transfers and the compute after it): the load here is one chunk, and its run of the
  // pool the barrier.
  d.host_threads = 4;
  d.barrier_seconds = 5e-6;
  d.pool_run_seconds = 1e-6;
  p.sync_pattern = popkit::config::SyncPattern::kFull;
  BOOST_TEST(priced(p, d) == 2e-6 + 1e-7 + 32 / (1e9 / 4) + 5e-6, tt::tolerance(1e-12));
  // A loop of 3 steps whose step is one chunk (the load, then the forward) is one segment
  // for all its steps, one run of the pool, under either pattern (the ladder sets of two
  // replicas sync too): no barrier a step.
  auto loop = [&](std::vector<Op> body, popkit::config::SyncPattern pattern) {
    Plan l = tiny(4);
    l.phases.push_back({"loop", {repeat(std::move(body), 3, IoMode::kCompute)}, {}, 0.0, -1, {}});
    l.sync_pattern = pattern;
    return priced(l, d);
  };
  const std::vector<Op> one_chunk{load(OpKind::kHostLoad, 2), forward()};
  BOOST_TEST(loop(one_chunk, popkit::config::SyncPattern::kFull) ==
                 loop(one_chunk, popkit::config::SyncPattern::kReplicaAndLadder),
             tt::tolerance(1e-12));
  // With a store after the forward, a step is two chunks. Full's lanes meet after each:
  // 2 x 3 barriers, where the ladder sets run the segment as one run of the pool, each
  // set's two replicas on a pool of 2 of the 4 threads, run for each part of each chunk
  // (the load, the forward; the store, its empty compute): 4 x 3 runs, their threads
  // spinning.
  const std::vector<Op> two_chunks{load(OpKind::kHostLoad, 2), forward(),
                                   load(OpKind::kHostStore, 2)};
  const double full = loop(two_chunks, popkit::config::SyncPattern::kFull);
  const double ladder = loop(two_chunks, popkit::config::SyncPattern::kReplicaAndLadder);
  BOOST_TEST(full - ladder == 6 * 5e-6 - (5e-6 + 12 * 1e-6), tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(io_overlapped_hides_only_the_bytes_of_a_repeat) {
  // Each step: a host load (100 ns latency + 32 ns of bytes) and the forward.
  const double bytes = 32 / 1e9;
  const double serial = 1e-7 + kForward;
  Plan p = tiny();
  p.phases.push_back(
      {"loop", {repeat({load(OpKind::kHostLoad, 2), forward()}, 3, IoMode::kIo)}, {}, 0.0, -1, {}});
  BOOST_TEST(priced(p) == 3 * (serial + bytes), tt::tolerance(1e-12));
  // Overlapped: a two-stage pipeline over 3 steps, the latency staying with compute.
  p.phases[0].ops[0].io_mode = IoMode::kIoOverlapped;
  BOOST_TEST(priced(p) == 3 * serial + bytes, tt::tolerance(1e-12));
  // When the bytes take longer than the compute, compute hides behind them instead.
  DeviceProfile slow = profile();
  slow.host.bytes_per_second = 1e6;  // 32 us per load
  BOOST_TEST(priced(p, slow) == 3 * (32 / 1e6) + serial, tt::tolerance(1e-12));
  // A load outside the repeat is not overlapped.
  p.phases[0].ops.insert(p.phases[0].ops.begin(), load(OpKind::kHostLoad, 2));
  BOOST_TEST(priced(p) == (1e-7 + bytes) + 3 * serial + bytes, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_preloaded_load_overlaps_its_phase) {
  Op pre = load(OpKind::kRemoteLoad, 2);
  pre.preload = true;
  Plan p = tiny();
  p.phases.push_back({"fwd", {forward(), pre}, {}, 0.0, -1, {}});
  // The load's 32 ns of bytes hide behind the forward; its latency does not.
  BOOST_TEST(priced(p) == kForward + 1e-7, tt::tolerance(1e-12));
  DeviceProfile slow = profile();
  slow.streaming.bytes_per_second = 1e6;  // 32 us: longer than the phase
  BOOST_TEST(priced(p, slow) == 1e-7 + 32 / 1e6, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(bookkeeping_and_on_tile_copies_cost_nothing) {
  Plan p = tiny();
  Op alloc, free, zero, slice;
  alloc.kind = OpKind::kAlloc;
  alloc.outputs = {1};
  free.kind = OpKind::kFree;
  free.inputs = {1};
  zero.kind = OpKind::kZero;
  zero.outputs = {1};
  slice.kind = OpKind::kSliceShard;
  slice.inputs = {0};
  slice.outputs = {2};
  p.phases.push_back({"none", {alloc, zero, slice, free}, {}, 0.0, -1, {}});
  BOOST_TEST(priced(p) == 0.0);
}

// A CPU (host_threads): replicas beyond its threads take turns, at any op but a
// collective's latency.
BOOST_AUTO_TEST_CASE(a_cpu_runs_its_replicas_in_turns_on_its_threads) {
  DeviceProfile d = profile();
  d.host_threads = 2;
  Plan two = tiny(2);
  two.phases.push_back({"fwd", {forward(), load(OpKind::kRemoteLoad, 2)}, {}, 0.0, -1, {}});
  const double own = kForward + 1e-7 + 32 / 1e9;
  BOOST_TEST(priced(two, d) == own, tt::tolerance(1e-12));
  Plan four = tiny(4);
  four.phases = two.phases;
  BOOST_TEST(priced(four, d) == 2 * own, tt::tolerance(1e-12));
  d.host_threads = 3;  // 4 replicas on 3 threads: one thread runs two
  BOOST_TEST(priced(four, d) == 2 * own, tt::tolerance(1e-12));
}

// One replica on a CPU spreads a GEMM of at least 2^18 multiply-adds over its column
// blocks of 128 (planner/workspace.h): 512 columns are 4 blocks, 2 per thread.
BOOST_AUTO_TEST_CASE(one_replica_spreads_a_large_gemm_over_the_threads) {
  Plan p = wide_forward(8);
  // 2 * 8 * 512 * 512 FLOPs at 1e9 * 0.5 * 8 / (8 + 2); the bias, 8 * 512 element-wise.
  const double gemm = 2.0 * 8 * 512 * 512 / (1e9 * 0.4);
  const double bias = 8 * 512 / 1e9;
  BOOST_TEST(priced(p) == 1e-6 + gemm + bias, tt::tolerance(1e-12));
  DeviceProfile d = profile();
  d.host_threads = 2;
  BOOST_TEST(priced(p, d) == 1e-6 + gemm / 2 + bias, tt::tolerance(1e-12));
  d.host_threads = 3;  // ceil(4 / 3) = 2 blocks on the busiest thread
  BOOST_TEST(priced(p, d) == 1e-6 + gemm / 2 + bias, tt::tolerance(1e-12));
  // The blocks are one run of the thread pool: one barrier.
  d.barrier_seconds = 5e-6;
  BOOST_TEST(priced(p, d) == 1e-6 + gemm / 2 + 5e-6 + bias, tt::tolerance(1e-12));
  // Its threads still spin from the GEMM before: a run's price when they do.
  d.pool_run_seconds = 2e-7;
  BOOST_TEST(priced(p, d) == 1e-6 + gemm / 2 + 2e-7 + bias, tt::tolerance(1e-12));
  // Spread blocks that run at 80 % of the rate they reach beside another thread's GEMM
  // (gemm_spread_efficiency); a GEMM that is not spread keeps its rate.
  d.gemm_spread_efficiency = 0.8;
  BOOST_TEST(priced(p, d) == 1e-6 + gemm / 2 / 0.8 + 2e-7 + bias, tt::tolerance(1e-12));
  Plan two = p;
  two.replication_factor = 2;
  two.global_batch_size = 16;
  d.barrier_seconds = 0.0;  // the replicas' segment: no run of the pool to price
  BOOST_TEST(priced(two, d) == 1e-6 + gemm + bias, tt::tolerance(1e-12));
}

// A linear's forward on 2,048 rows runs in 16 row tiles of 128 rows, more than its 4
// column blocks (planner/workspace.h gemm_tiles): on 8 threads its busiest thread runs 2
// tiles of 16; its weight gradient stays in its 4 column blocks.
BOOST_AUTO_TEST_CASE(one_replica_spreads_a_tall_gemm_in_row_tiles) {
  Plan p = wide_forward(2048);
  DeviceProfile d = profile();
  d.gemm_half_m = 0;  // the GEMM at max_efficiency: 0.5
  d.host_threads = 1;
  const double gemm = 2.0 * 2048 * 512 * 512 / (1e9 * 0.5);
  const double bias = 2048.0 * 512 / 1e9;
  BOOST_TEST(priced(p, d) == 1e-6 + gemm + bias, tt::tolerance(1e-12));
  d.host_threads = 8;
  BOOST_TEST(priced(p, d) == 1e-6 + gemm * 2 / 16 + bias, tt::tolerance(1e-12));
  const ColumnBlocks tiles = gemm_tiles(2048, 512, 512);
  BOOST_TEST(tiles.row_tiles == 16);
  BOOST_TEST(tiles.n == 1);
  BOOST_TEST(column_blocks(512 * 2048, 512).n == 4);  // the weight gradient's, inner 2,048
}

// One replica on a CPU steps its optimizer in element blocks of 32,768 (planner/
// element_blocks.h) spread over the threads: 100,000 elements are 4 blocks, 2 a thread.
BOOST_AUTO_TEST_CASE(one_replica_spreads_its_optimizer_step_over_the_threads) {
  Plan p = tiny();
  const auto add = [&p] {
    DeviceTensor t;
    t.shape = {100'000};
    t.nelms = 100'000;
    t.nbytes = 400'000;
    p.tensors.push_back(t);
    return static_cast<int>(p.tensors.size()) - 1;
  };
  Op step;
  step.kind = OpKind::kOptimizerStep;
  step.state = {add(), add(), add()};  // Adam: the weight, its two moments
  step.inputs = {add()};               // the gradient
  p.phases.push_back({"update", {step}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.host_threads = 1;
  const double one = priced(p, d);
  const auto flops = static_cast<double>(p.phases[0].ops[0].flops);
  BOOST_TEST(flops > 0.0);
  BOOST_TEST(one == 1e-6 + flops / 1e9, tt::tolerance(1e-12));
  d.host_threads = 2;
  BOOST_TEST(priced(p, d) == 1e-6 + flops / 1e9 / 2, tt::tolerance(1e-12));
  d.host_threads = 3;  // ceil(4 / 3) = 2 blocks on the busiest thread
  d.pool_run_seconds = 2e-7;
  BOOST_TEST(priced(p, d) == 1e-6 + flops / 1e9 / 2 + 2e-7, tt::tolerance(1e-12));
  d.gemm_spread_efficiency = 0.8;  // the spread rate, as the GEMMs' blocks
  BOOST_TEST(priced(p, d) == 1e-6 + flops / 1e9 / 2 / 0.8 + 2e-7, tt::tolerance(1e-12));
  Plan two = p;  // a thread a replica: nothing to spread
  two.replication_factor = 2;
  two.global_batch_size = 4;
  BOOST_TEST(priced(two, d) == 1e-6 + flops / 1e9, tt::tolerance(1e-12));
}

// A CPU's small-batch kernels: an op of at most small_rows rows runs its GEMMs at their
// own efficiency, not the curve's.
BOOST_AUTO_TEST_CASE(a_cpu_prices_small_batches_at_their_kernels_rate) {
  Plan p = tiny();  // 2 rows
  p.phases.push_back({"fwd", {forward()}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.host_threads = 1;
  d.gemm_small_rows = 2;
  d.gemm_small_rows_efficiency = 0.75;
  BOOST_TEST(priced(p, d) == 1e-6 + 48 / (1e9 * 0.75) + 6 / 1e9, tt::tolerance(1e-12));
  d.gemm_small_rows = 1;  // 2 rows take the curve
  BOOST_TEST(priced(p, d) == kForward, tt::tolerance(1e-12));
}

// A CPU whose thread cycles through more than its caches hold: each GEMM waits for the
// cold part of its weight-sized operand (m n k / rows elements), the part rising from 0
// at warm_bytes to 1 at cold_bytes in log(working set); the working set is the bytes of
// the distinct tensors the phase touches, times the replicas sharing the thread.
BOOST_AUTO_TEST_CASE(a_cpu_prices_the_cold_part_of_a_gemms_operand) {
  Plan p = tiny();  // the forward touches the input and the output: 32 + 24 bytes
  p.phases.push_back({"fwd", {forward()}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.host_threads = 1;
  d.cold_gemm_bytes_per_second = 1e9;
  const double operand = 2.0 * 3 * 4 / 2 * 4 / 1e9;  // 12 floats at 1 GB/s
  d.cache_warm_bytes = 56;
  d.cache_cold_bytes = 224;
  BOOST_TEST(priced(p, d) == kForward, tt::tolerance(1e-12));  // 56 bytes: warm
  d.cache_warm_bytes = 14;  // 56 is halfway from 14 to 224 in log
  BOOST_TEST(priced(p, d) == kForward + operand / 2, tt::tolerance(1e-12));
  d.cache_cold_bytes = 28;  // all cold
  BOOST_TEST(priced(p, d) == kForward + operand, tt::tolerance(1e-12));
  // Two replicas on the one thread: each takes its turn, over twice the working set.
  Plan two = tiny(2);
  two.phases.push_back({"fwd", {forward()}, {}, 0.0, -1, {}});
  d.cache_warm_bytes = 56;
  d.cache_cold_bytes = 224;  // 112 bytes: halfway
  BOOST_TEST(priced(two, d) == 2 * (kForward + operand / 2), tt::tolerance(1e-12));
  // The small-batch kernels take their own ramp and rate.
  d.gemm_small_rows = 2;
  d.gemm_small_rows_efficiency = 0.25;  // the curve's rate at 2 rows: the same warm time
  d.small_rows_warm_bytes = 112;        // warm at 112 bytes
  d.small_rows_cold_bytes = 448;
  d.small_rows_cold_bytes_per_second = 0.5e9;
  BOOST_TEST(priced(two, d) == 2 * kForward, tt::tolerance(1e-12));
  d.small_rows_warm_bytes = 56;  // all cold from 112 bytes, at half the rate
  d.small_rows_cold_bytes = 112;
  BOOST_TEST(priced(two, d) == 2 * (kForward + 2 * operand), tt::tolerance(1e-12));
  // Not a CPU, or no ramp: no term.
  d.host_threads = 0;
  BOOST_TEST(priced(p, d) == kForward, tt::tolerance(1e-12));
}

// Once a step a thread cycles through its replicas' remote buffers, device memory and host
// data: as those outgrow its caches, its copies run at the cold copy rate.
BOOST_AUTO_TEST_CASE(a_cpu_copies_a_cold_remote_store_at_its_rate) {
  Plan p = tiny();
  p.streaming_bytes = 1000;
  p.phases.push_back({"load", {load(OpKind::kRemoteLoad, 2)}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.host_threads = 1;
  d.cold_copy_bytes_per_second = 0.5e9;
  d.copy_warm_bytes = 1000;
  d.copy_cold_bytes = 4000;
  BOOST_TEST(priced(p, d) == 1e-7 + 32 / 1e9, tt::tolerance(1e-12));
  p.streaming_bytes = 2000;  // halfway
  BOOST_TEST(priced(p, d) == 1e-7 + 32 / 1e9 + 0.5 * 32 / 1e9, tt::tolerance(1e-12));
  // The thread cycles through its device memory and the step's host data too.
  p.streaming_bytes = 1000;
  p.peak_bytes = 600;
  p.host_bytes_per_step = 400;
  BOOST_TEST(priced(p, d) == 1e-7 + 32 / 1e9 + 0.5 * 32 / 1e9, tt::tolerance(1e-12));
  p.peak_bytes = p.host_bytes_per_step = 0;
  p.streaming_bytes = 4000;
  BOOST_TEST(priced(p, d) == 1e-7 + 32 / 0.5e9, tt::tolerance(1e-12));
  // Two replicas on the thread, each its own 2000 bytes: all cold, each its turn.
  Plan two = tiny(2);
  two.streaming_bytes = 2000;
  two.phases.push_back({"load", {load(OpKind::kRemoteLoad, 2)}, {}, 0.0, -1, {}});
  BOOST_TEST(priced(two, d) == 2 * (1e-7 + 32 / 0.5e9), tt::tolerance(1e-12));
}

// The same on a plan the builder makes, not one put together by hand as above: the
// builder sums the remote store (streaming_bytes) before it prices the plan, so a CPU
// whose store has outgrown its caches pays the cold rate for every remote byte.
BOOST_AUTO_TEST_CASE(a_built_plan_copies_its_cold_remote_store_at_the_cold_rate) {
  popkit::config::Config c = test::mnist_phased();  // R 2, weights and state remote
  DeviceProfile& d = *c.device.resolved;
  d.host_threads = 2;  // a CPU: a thread per replica
  const Plan warm = build_plan(c);
  d.copy_warm_bytes = 1.0;
  d.copy_cold_bytes = 2.0;  // every store is all cold
  d.cold_copy_bytes_per_second = d.streaming.rate(2) / 2;
  const Plan cold = build_plan(c);
  BOOST_TEST(cold.streaming_bytes > 0u);
  // A step's remote bytes on a replica (a repeat's count its body's, as often as it runs).
  double bytes = 0.0;
  for (const Phase& ph : cold.phases)
    for (const Op& op : ph.ops) bytes += static_cast<double>(op.remote_bytes);
  BOOST_TEST(bytes > 0.0);
  // At half the rate, each byte takes its warm time again.
  BOOST_TEST(
      cold.estimated_step_seconds - warm.estimated_step_seconds == bytes / d.streaming.rate(2),
      tt::tolerance(1e-9));
}

// The optimizer's step reads and writes each weight's state once a step: on a CPU whose
// step cycles through more than its caches hold (the copies' ramp, on the same working
// set), that state comes back cold, and the step runs at the cold element-wise rate.
BOOST_AUTO_TEST_CASE(a_cpu_steps_its_optimizer_on_cold_state_at_the_cold_rate) {
  popkit::config::Config c = test::mnist_phased();
  DeviceProfile& d = *c.device.resolved;
  d.host_threads = 2;  // a CPU: a thread per replica
  d.tiles = 1;         // no IO tiles taken from compute
  const Plan warm = build_plan(c);
  d.copy_warm_bytes = 1.0;
  d.copy_cold_bytes = 2.0;  // all of it cold
  d.cold_vector_flops_per_second = d.vector_flops_per_second / 2;
  const Plan cold = build_plan(c);
  // A step's optimizer FLOPs on a replica (a repeat's, as often as it runs).
  double flops = 0.0;
  const auto add = [&](const auto& self, const std::vector<Op>& ops, double times) -> void {
    for (const Op& op : ops) {
      if (op.kind == OpKind::kOptimizerStep) flops += times * static_cast<double>(op.flops);
      self(self, op.body, times * static_cast<double>(std::max<std::int64_t>(op.steps, 1)));
    }
  };
  for (const Phase& ph : cold.phases) add(add, ph.ops, 1.0);
  BOOST_TEST(flops > 0.0);
  // At half the rate, each FLOP takes its warm time again.
  BOOST_TEST(cold.estimated_step_seconds - warm.estimated_step_seconds ==
                 flops / d.vector_flops_per_second,
             tt::tolerance(1e-9));
}

// A collective on a CPU: each synchronised exchange is a run of the thread pool.
BOOST_AUTO_TEST_CASE(a_cpu_collective_pays_a_barrier_per_exchange) {
  Plan p = tiny(2);
  Op all_reduce;
  all_reduce.kind = OpKind::kAllReduce;
  all_reduce.state = {1};
  all_reduce.grouping = {2, 2, 1};
  p.phases.push_back({"reduce", {all_reduce}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.host_threads = 2;
  // 4 (G-1) / G of 24 bytes per replica, halved, over 1 GB/s; two exchanges.
  const double bytes = 48 / 2 / 1e9;
  BOOST_TEST(priced(p, d) == 2 * 1e-7 + bytes, tt::tolerance(1e-12));
  d.barrier_seconds = 5e-6;
  BOOST_TEST(priced(p, d) == 2 * (1e-7 + 5e-6) + bytes, tt::tolerance(1e-12));
}

// R > 1 replicas on a CPU run each segment (the local ops between collectives and
// repeats) as a run of the engine's pool, its threads woken (barrier_seconds): a repeat of
// local ops is one for all its steps, one with a collective makes its segments at every
// step. One replica runs its segments inline, with no run of the pool.
BOOST_AUTO_TEST_CASE(a_cpu_wakes_its_pool_for_every_segment_of_its_replicas) {
  Op all_reduce;
  all_reduce.kind = OpKind::kAllReduce;
  all_reduce.state = {1};
  all_reduce.grouping = {2, 2, 1};
  Plan p = tiny(2);
  // Segments: [forward] | [forward] | the local repeat's 1 | the other's [forward] and
  // [forward] at each of its 2 steps | [forward]: 8. Exchanges: 2 + 2 x 2 = 6.
  p.phases.push_back(
      {"step",
       {forward(), all_reduce, forward(), repeat({forward(), forward()}, 3, IoMode::kCompute),
        repeat({forward(), all_reduce, forward()}, 2, IoMode::kCompute), forward()},
       {},
       0.0,
       -1,
       {}});
  DeviceProfile d = profile();
  d.host_threads = 2;
  const double asleep_free = priced(p, d);
  d.barrier_seconds = 5e-6;
  BOOST_TEST(priced(p, d) - asleep_free == (8 + 6) * 5e-6, tt::tolerance(1e-9));

  Plan one = tiny(1);
  one.phases.push_back(
      {"step", {forward(), repeat({forward()}, 3, IoMode::kCompute)}, {}, 0.0, -1, {}});
  d.barrier_seconds = 0.0;
  const double inline_free = priced(one, d);
  d.barrier_seconds = 5e-6;
  BOOST_TEST(priced(one, d) == inline_free, tt::tolerance(1e-12));
}

// A backward's running mean of its accumulators is kRunningMeanFlops a weight at the
// element-wise rate, unless a CPU profile measured what folding it into the weight
// gradient costs (accumulate_seconds): then that, a weight, at each micro-batch after the
// first. A device's profile keeps the FLOPs.
BOOST_AUTO_TEST_CASE(a_cpu_prices_the_running_mean_as_it_measured_it) {
  Plan p = tiny(2);
  Op back;
  back.kind = OpKind::kBackward;
  back.layer = 0;
  back.inputs = {0, 1, -1};  // in [2, 4], pre [2, 3], no weight needed to price it
  back.outputs = {-1};       // no input gradient
  back.state = {1, -1, -1};
  p.phases.push_back({"loop", {repeat({back}, 4, IoMode::kCompute)}, {}, 0.0, -1, {}});
  const double weights = 4 * 3 + 3;
  DeviceProfile d = profile();
  d.host_threads = 2;
  const double as_flops = priced(p, d);
  d.accumulate_seconds = 1e-9;
  const double measured = priced(p, d);
  // 4 micro-batches lose the FLOPs at 1 GFLOP/s; 3 of them fold at 1 ns a weight.
  BOOST_TEST(measured - as_flops ==
                 3 * weights * 1e-9 - 4 * static_cast<double>(kRunningMeanFlops) * weights / 1e9,
             tt::tolerance(1e-9));
  d.host_threads = 0;
  const double device = priced(p, d);
  d.accumulate_seconds = 0.0;
  BOOST_TEST(device == priced(p, d), tt::tolerance(1e-12));
}

// The engine's IO thread (planner/schedule.h) takes a loop's double-buffered transfers
// only when its compute threads leave a core free and the loop moves at least
// kIoThreadMinBytes a step; otherwise io_overlapped on a CPU moves the data where io does,
// and so does the estimate.
BOOST_AUTO_TEST_CASE(io_overlapped_on_a_cpu_needs_a_free_thread_and_enough_bytes) {
  Plan p = tiny(2);
  p.tensors[2].double_buffer = 0;  // the images slot has a second one
  p.phases.push_back({"loop",
                      {repeat({load(OpKind::kHostLoad, 2), forward()}, 3, IoMode::kIoOverlapped)},
                      {},
                      0.0,
                      -1,
                      {}});
  const double serial = 1e-7 + kForward;
  DeviceProfile d = profile();
  d.host_threads = 4;
  // 32 bytes a step: not worth the hand-off, however many cores are free.
  BOOST_TEST(priced(p, d) == 3 * (serial + 32 / 1e9), tt::tolerance(1e-12));
  // 512 KiB a step: the IO thread takes them, and they hide behind compute...
  p.tensors[2].shape = {2, 65536};
  p.tensors[2].nelms = 2 * 65536;
  p.tensors[2].nbytes = kIoThreadMinBytes;
  const double bytes = static_cast<double>(kIoThreadMinBytes) / 1e9;
  BOOST_TEST(priced(p, d) == 3 * bytes + serial, tt::tolerance(1e-12));
  // ... unless every thread runs a replica.
  d.host_threads = 2;
  BOOST_TEST(priced(p, d) == 3 * (serial + bytes), tt::tolerance(1e-12));
}

// Preloaded loads likewise: on a CPU they move beside the phase's compute only when the
// IO thread takes them (a core free, and the phase's preloads at least kIoThreadMinBytes).
BOOST_AUTO_TEST_CASE(a_preload_on_a_cpu_overlaps_only_on_the_io_thread) {
  Op pre = load(OpKind::kRemoteLoad, 2);
  pre.preload = true;
  Plan p = tiny(2);
  p.phases.push_back({"fwd", {forward(), pre}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.host_threads = 4;
  d.streaming.bytes_per_second = 1e6;  // 32 us: longer than the phase
  BOOST_TEST(priced(p, d) == kForward + 1e-7 + 32 / 1e6, tt::tolerance(1e-12));
  p.tensors[2].nbytes = kIoThreadMinBytes;
  const double bytes = static_cast<double>(kIoThreadMinBytes) / 1e6;
  BOOST_TEST(priced(p, d) == 1e-7 + bytes, tt::tolerance(1e-12));
  d.host_threads = 2;
  BOOST_TEST(priced(p, d) == kForward + 1e-7 + bytes, tt::tolerance(1e-12));
}

// One run of the program (a training step, an evaluation batch) costs the profile's
// program_seconds beyond its ops, once however many phases and micro-batches it holds:
// the step grows by exactly that, its phases not at all.
BOOST_AUTO_TEST_CASE(a_run_of_the_program_pays_its_launch_once) {
  Plan p = tiny();
  p.phases.push_back({"fwd", {forward()}, {}, 0.0, -1, {}});
  p.phases.push_back({"again", {forward()}, {}, 0.0, -1, {}});
  DeviceProfile d = profile();
  d.program_seconds = 3e-6;
  BOOST_TEST(priced(p, d) == 2 * kForward + 3e-6, tt::tolerance(1e-12));
  BOOST_TEST(p.phases[0].estimated_seconds == kForward, tt::tolerance(1e-12));
  BOOST_TEST(p.phases[1].estimated_seconds == kForward, tt::tolerance(1e-12));
  BOOST_TEST(p.estimated_samples_per_second == 2 / (2 * kForward + 3e-6), tt::tolerance(1e-12));
  // A plan the builder makes, training (phases, accumulation 4) and evaluation alike.
  popkit::config::Config c = test::mnist_phased();
  for (const Program program : {Program::kTrain, Program::kEval}) {
    c.device.resolved->program_seconds = 0.0;
    const Plan without = build_plan(c, program);
    c.device.resolved->program_seconds = 250e-6;
    const Plan with = build_plan(c, program);
    BOOST_TEST(with.estimated_step_seconds - without.estimated_step_seconds == 250e-6,
               tt::tolerance(1e-9));
    for (std::size_t i = 0; i < with.phases.size(); ++i)
      BOOST_TEST(with.phases[i].estimated_seconds == without.phases[i].estimated_seconds);
  }
}

BOOST_AUTO_TEST_SUITE_END()
