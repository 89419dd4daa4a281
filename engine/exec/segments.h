// Running a list of ops (setup, or a phase) on the replicas this process hosts, as the
// plan's schedule (planner/schedule.h) says: runs of local ops between collectives and
// repeats are segments, each replica running a whole segment as one task, so the pool
// synchronises once per segment and not once per op; execution.sync_pattern's chunks
// make a group's devices start each run of transfers together; a repeat runs its body
// for its steps, or io_overlapped's loop with the IO thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/exec/io_thread.h"
#include "engine/exec/op_runner.h"
#include "engine/exec/state.h"
#include "planner/schedule.h"

namespace popkit::engine {

class Segments {
 public:
  Segments(EngineState& state, const OpRunner& ops, IoThread& io) : m_(state), ops_(ops), io_(io) {}

  // `ops` once, as `schedule` says; with `sample`, each device's memory is sampled after
  // every alloc and free.
  void run_ops(const std::vector<planner::Op>& ops, const planner::OpsSchedule& schedule,
               bool sample) {
    run_list(ops, schedule, 0, 1, sample);
  }

 private:
  void run_list(const std::vector<planner::Op>& ops, const planner::OpsSchedule& schedule,
                std::int64_t s0, std::int64_t s1, bool sample);
  void run_segment(std::span<const planner::Op> ops, const planner::ScheduleItem& item,
                   std::int64_t s0, std::int64_t s1, bool sample);
  bool run_at(const planner::Op& op, std::int64_t r, std::int64_t s, std::size_t at, bool sample);
  void run_synced(std::span<const planner::Op> ops, const planner::ScheduleItem& item,
                  std::int64_t s0, std::int64_t s1, bool sample);

  EngineState& m_;
  const OpRunner& ops_;
  IoThread& io_;
  // replica_and_ladder: each ladder set's pool when a set has more than one thread.
  std::array<std::unique_ptr<ThreadPool>, 2> lane_pools_;
};

}  // namespace popkit::engine
