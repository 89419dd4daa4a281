// The IO thread: with io_overlapped it moves a repeat step's double-buffered loads and
// stores while the replicas compute the step before, and with execution.io_schedule:
// preload it runs a phase's preload loads while the phase computes. It takes either only
// where EngineOptions::io_overlap lets it (kAuto: a core the compute threads leave free
// and at least kIoThreadMinBytes a step); otherwise the replicas' own threads move the
// data where io would.
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

  // An io_overlapped repeat with the thread moving its data; false, having run nothing,
  // when the repeat must run as io runs it (no thread, or a collective in the loop).
  bool run_overlapped(const planner::Op& repeat);

  // kAuto's choice: the thread needs a core of its own and pieces big enough to pay for
  // the hand-off, and for the consuming core reading the data from another core's
  // cache. Measured here (bench/README.md), R 1 on one compute thread: at 200 KiB per
  // step the thread lost 2-10% to moving the data in place; from 768 KiB it was even or
  // gained up to 5%.
  static constexpr std::uint64_t kIoThreadMinBytes = std::uint64_t{512} << 10;

 private:
  [[nodiscard]] bool use_thread(std::uint64_t bytes_per_step) const;
  IoQueue& queue();

  EngineState& m_;
  const OpRunner& ops_;
  std::unique_ptr<IoQueue> queue_;  // made at first use
  // Per phase, its preload loads (top-level ops marked preload) and their bytes; whether
  // the current phase runs them on the thread, and the thread's job for them.
  std::vector<std::vector<const planner::Op*>> preloads_;
  std::vector<std::uint64_t> preload_bytes_;
  bool preload_on_thread_ = false;
  std::function<void(std::int64_t)> preload_job_;
};

}  // namespace popkit::engine
