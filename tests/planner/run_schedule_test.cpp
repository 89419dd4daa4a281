// The schedule of a plan on the engine's threads (planner/schedule.h), which the engine
// runs and the cost model prices: segments between collectives and repeats, the sync
// chunks of execution.sync_pattern, the runs of the pool, and what the IO thread takes.
// And that estimating a plan leaves it as it was.
#include <boost/test/unit_test.hpp>
#include <utility>

#include "planner/build.h"
#include "planner/cost.h"
#include "planner/schedule.h"
#include "tests/planner/configs.h"

using namespace popkit::planner;
using popkit::config::SyncPattern;
using Kind = ScheduleItem::Kind;

namespace {

// Tensors: 0 an input [2, 4], 1 an output [2, 3], 2 an images slot of `slot_bytes`.
Plan plan_of(std::int64_t replicas, std::vector<Op> ops, std::uint64_t slot_bytes = 32) {
  Plan p;
  p.replication_factor = replicas;
  for (const std::uint64_t bytes : {std::uint64_t{32}, std::uint64_t{24}, slot_bytes}) {
    DeviceTensor t;
    t.nbytes = bytes;
    p.tensors.push_back(t);
  }
  p.tensors[2].double_buffer = 0;
  p.phases.push_back({"phase", std::move(ops), {}, 0.0, -1, {}});
  return p;
}

Op op(OpKind kind, int tensor = 1) {
  Op o;
  o.kind = kind;
  o.outputs = {tensor};
  return o;
}

Op repeat(std::vector<Op> body, IoMode mode = IoMode::kIo) {
  Op r;
  r.kind = OpKind::kRepeat;
  r.steps = 4;
  r.io_mode = mode;
  r.body = std::move(body);
  return r;
}

RunThreads threads(std::int64_t replicas, int n, int cores) {
  return {replicas, compute_threads(n, replicas, 1), cores, IoThreadUse::kAuto};
}

const OpsSchedule& phase(const Schedule& s) {
  return s.phases.front().ops;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_schedule)

BOOST_AUTO_TEST_CASE(the_engine_runs_one_thread_a_replica_or_spreads_one_replica) {
  BOOST_TEST(compute_threads(8, 4, 1) == 4);  // a thread a replica
  BOOST_TEST(compute_threads(2, 4, 1) == 2);  // replicas take turns
  BOOST_TEST(compute_threads(8, 1, 1) == 8);  // one replica's GEMMs spread
  BOOST_TEST(compute_threads(8, 2, 3) == 1);  // a worker thread per stage instead
  BOOST_TEST(compute_threads(0, 1, 1) == 1);
  const Plan p = plan_of(1, {op(OpKind::kForward)});
  BOOST_TEST(schedule(p, threads(1, 8, 8)).spread_gemms);
  BOOST_TEST(!schedule(p, threads(1, 1, 8)).spread_gemms);
  BOOST_TEST((phase(schedule(p, threads(1, 8, 8))).items.front().run == SegmentRun::kInline));
  const Plan two = plan_of(2, {op(OpKind::kForward)});
  BOOST_TEST(!schedule(two, threads(2, 8, 8)).spread_gemms);
  BOOST_TEST((phase(schedule(two, threads(2, 8, 8))).items.front().run == SegmentRun::kPool));
}

BOOST_AUTO_TEST_CASE(segments_are_the_local_ops_between_collectives_and_repeats) {
  const Plan p = plan_of(
      2, {op(OpKind::kAlloc), op(OpKind::kForward), op(OpKind::kAllReduce), op(OpKind::kSliceShard),
          op(OpKind::kForward), repeat({op(OpKind::kForward), op(OpKind::kForward)}),
          repeat({op(OpKind::kForward), op(OpKind::kAllReduce)}), op(OpKind::kFree)});
  const Schedule run = schedule(p, threads(2, 2, 2));
  const OpsSchedule& s = phase(run);
  BOOST_TEST(!s.across_steps);
  const std::vector<std::array<std::size_t, 3>> want{{0, 0, 2}, {1, 2, 3}, {1, 3, 4}, {0, 4, 5},
                                                     {2, 5, 6}, {2, 6, 7}, {0, 7, 8}};
  BOOST_REQUIRE_EQUAL(s.items.size(), want.size());
  const Kind kinds[] = {Kind::kSegment, Kind::kCollective, Kind::kRepeat};
  for (std::size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_CONTEXT("item " << i) {
      BOOST_TEST((s.items[i].kind == kinds[want[i][0]]));
      BOOST_TEST(s.items[i].first == want[i][1]);
      BOOST_TEST(s.items[i].end == want[i][2]);
    }
  }
  // A body of local ops is one segment for all its steps; one with a collective runs
  // step after step.
  BOOST_TEST(s.items[4].body.front().across_steps);
  BOOST_TEST(s.items[4].body.front().items.size() == 1u);
  BOOST_TEST(!s.items[5].body.front().across_steps);
  BOOST_TEST(s.items[5].body.front().items.size() == 2u);
}

BOOST_AUTO_TEST_CASE(full_cuts_a_segment_at_each_transfer_after_compute) {
  // Allocs join the part they are in: the two loads with their allocs are one run of
  // transfers; the store after the forward starts a second chunk.
  std::vector<Op> ops{op(OpKind::kAlloc),       op(OpKind::kHostLoad, 2), op(OpKind::kAlloc),
                      op(OpKind::kHostLoad, 2), op(OpKind::kForward),     op(OpKind::kHostStore),
                      op(OpKind::kForward)};
  Plan p = plan_of(4, ops);
  p.sync_pattern = SyncPattern::kFull;
  const ScheduleItem full = phase(schedule(p, threads(4, 4, 4))).items.front();
  BOOST_TEST((full.run == SegmentRun::kLockstep));
  const std::vector<SyncChunk> want{{0, 4, 5}, {5, 6, 7}};
  BOOST_TEST((full.chunks == want));
  // The ladder sets of R 4 are two replicas each: they sync within themselves; with R 2,
  // a set of one waits for no one, as under single_pipeline.
  p.sync_pattern = SyncPattern::kReplicaAndLadder;
  const Schedule ladder = schedule(p, threads(4, 4, 4));
  BOOST_TEST((phase(ladder).items.front().run == SegmentRun::kLadder));
  BOOST_TEST(ladder.lane_threads == 2);
  Plan two = plan_of(2, ops);
  two.sync_pattern = SyncPattern::kReplicaAndLadder;
  BOOST_TEST((phase(schedule(two, threads(2, 2, 2))).items.front().run == SegmentRun::kPool));
  BOOST_TEST(phase(schedule(two, threads(2, 2, 2))).items.front().chunks.empty());
  p.sync_pattern = SyncPattern::kSinglePipeline;
  BOOST_TEST((phase(schedule(p, threads(4, 4, 4))).items.front().run == SegmentRun::kPool));
  // One chunk (the loads, then compute): the run of the pool that starts the segment is
  // its only sync. No transfer: no sync at all.
  Plan one = plan_of(4, {op(OpKind::kHostLoad, 2), op(OpKind::kForward)});
  const ScheduleItem single = phase(schedule(one, threads(4, 4, 4))).items.front();
  BOOST_TEST((single.run == SegmentRun::kPool));
  BOOST_TEST(single.chunks.size() == 1u);
  Plan none = plan_of(4, {op(OpKind::kForward)});
  BOOST_TEST(phase(schedule(none, threads(4, 4, 4))).items.front().chunks.empty());
}

BOOST_AUTO_TEST_CASE(the_io_thread_needs_a_free_core_and_512_KiB_a_step) {
  auto takes = [](std::uint64_t slot_bytes, RunThreads run, std::vector<Op> extra = {}) {
    std::vector<Op> body{op(OpKind::kHostLoad, 2), op(OpKind::kForward)};
    body.insert(body.end(), extra.begin(), extra.end());
    const Plan p = plan_of(2, {repeat(body, IoMode::kIoOverlapped)}, slot_bytes);
    return phase(schedule(p, run)).items.front().io_thread;
  };
  const std::uint64_t enough = kIoThreadMinBytes;
  BOOST_TEST(takes(enough, threads(2, 8, 8)));
  BOOST_TEST(!takes(enough - 1, threads(2, 8, 8)));
  BOOST_TEST(!takes(enough, threads(2, 2, 2)));  // both cores run replicas
  BOOST_TEST(!takes(enough, threads(1, 8, 8)));  // one replica's GEMMs have them all
  // A collective in the loop makes every step bulk-synchronous.
  BOOST_TEST(!takes(enough, threads(2, 8, 8), {op(OpKind::kAllReduce)}));
  // poprun --io-thread on and off.
  RunThreads forced = threads(2, 2, 2);
  forced.io_thread = IoThreadUse::kThread;
  BOOST_TEST(takes(32, forced));
  forced = threads(2, 8, 8);
  forced.io_thread = IoThreadUse::kInline;
  BOOST_TEST(!takes(enough, forced));
  // Without the thread the loop runs as io runs it: its body's schedule.
  const Plan p = plan_of(2, {repeat({op(OpKind::kHostLoad, 2)}, IoMode::kIoOverlapped)});
  BOOST_TEST(phase(schedule(p, threads(2, 8, 8))).items.front().body.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_phases_preloads_go_to_the_io_thread_by_the_same_rule) {
  Op pre = op(OpKind::kRemoteLoad, 2);
  pre.preload = true;
  const Plan small = plan_of(2, {op(OpKind::kForward), pre});
  const PhaseSchedule s = schedule(small, threads(2, 8, 8)).phases.front();
  BOOST_TEST(s.preload_bytes == 32u);
  BOOST_TEST(!s.preload_on_io_thread);
  const Plan large = plan_of(2, {op(OpKind::kForward), pre}, kIoThreadMinBytes);
  BOOST_TEST(schedule(large, threads(2, 8, 8)).phases.front().preload_on_io_thread);
  BOOST_TEST(!schedule(large, threads(2, 2, 2)).phases.front().preload_on_io_thread);
}

BOOST_AUTO_TEST_CASE(a_pipelined_plan_runs_on_stage_workers) {
  auto c = test::mnist_phased();
  c.execution.mode = popkit::config::ExecutionMode::kStandard;
  c.remote = {};
  c.pipeline.stages = 2;
  const Schedule s = schedule(build_plan(c), threads(2, 8, 8));
  BOOST_TEST(s.stage_workers);
  BOOST_TEST(s.phases.empty());
}

// Estimating reads a plan and changes none of it; recording the estimate changes its
// estimates only.
BOOST_AUTO_TEST_CASE(estimating_never_changes_a_plan) {
  auto phased = test::mnist_phased();
  auto piped = phased;
  piped.execution.mode = popkit::config::ExecutionMode::kStandard;
  piped.remote = {};
  piped.pipeline.stages = 2;
  for (const auto& c : {phased, piped}) {
    Plan plan = build_plan(c);
    const Plan before = plan;
    popkit::config::DeviceProfile cpu = *c.device.resolved;
    cpu.host_threads = 4;
    cpu.barrier_seconds = 1e-6;
    const NetworkProfile network{1, 1e9, 1e-6};
    for (const popkit::config::DeviceProfile* profile :
         {&*c.device.resolved, &std::as_const(cpu)}) {
      const StepEstimate e = estimate_step(plan, *profile, &network);
      BOOST_TEST((plan == before));
      BOOST_TEST(e.phase_seconds.size() == plan.phases.size());
      BOOST_TEST(e.step_seconds > 0.0);
      BOOST_TEST(e.pipeline.has_value() == plan.pipeline.has_value());
      record_estimate(plan, e);
      BOOST_TEST(plan.estimated_step_seconds == e.step_seconds);
      BOOST_TEST(plan.network.has_value());
      Plan unpriced = plan;
      record_estimate(unpriced, StepEstimate{std::vector<double>(plan.phases.size(), 0.0), 0.0, 0.0,
                                             before.pipeline, before.network});
      Plan was = before;
      record_estimate(was, StepEstimate{std::vector<double>(plan.phases.size(), 0.0), 0.0, 0.0,
                                        before.pipeline, before.network});
      BOOST_TEST((unpriced == was));
      plan = before;
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
