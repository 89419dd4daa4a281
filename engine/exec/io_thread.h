// The IO thread: with io_overlapped it moves a repeat step's double-buffered loads and
// stores while the replicas compute the step before, and with execution.io_schedule:
// preload it runs a phase's preload loads while the phase computes. It takes either
// where the plan's schedule says (planner/schedule.h: kIoThreadMinBytes a step and a
// core the compute threads leave free, unless EngineOptions::io_overlap says otherwise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/exec/op_runner.h"
#include "engine/exec/state.h"
#include "engine/runtime/thread_pool.h"

namespace popkit::engine {

class IoThread {
 public:
  // Indexes the preload loads of every phase.
  IoThread(EngineState& state, const OpRunner& ops);
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Phase p begins: whether its preload loads go to the thread.
  void begin_phase(std::size_t p);
  // Whether `op` is one of the current phase's preload loads that the thread runs: the
  // segment then posts the replica's piece (post_preload) in its place.
  [[nodiscard]] bool takes(const planner::Op& op) const {
    return preload_on_thread_ && op.preload && op.kind == planner::OpKind::kRemoteLoad;
  }
  // Replica r's piece of the phase's preload loads, posted at the first of them (the
  // planner puts their allocs before them), once per phase.
  void post_preload(std::int64_t r);
  // Waits for the preload pieces in flight; their time counts as remote IO (the slowest
  // replica's, on top of the compute it overlapped). The first error is rethrown.
  void finish_preloads();

  // An io_overlapped repeat that the schedule gives the thread, each replica's loop a
  // task as `run` says (planner/schedule.h ScheduleItem::io_thread).
  void run_overlapped(const planner::Op& repeat, planner::SegmentRun run);

 private:
  IoQueue& queue();

  EngineState& m_;
  const OpRunner& ops_;
  std::unique_ptr<IoQueue> queue_;  // made at first use
  // Per phase, its preload loads (top-level ops marked preload); whether the current
  // phase runs them on the thread, and the thread's job for them.
  std::vector<std::vector<const planner::Op*>> preloads_;
  bool preload_on_thread_ = false;
  std::function<void(std::int64_t)> preload_job_;
};

}  // namespace popkit::engine
