// What the engine's parts share (engine/exec/): the plan and the options, the replicas'
// devices (each a memory block, an account, a remote store), the pool that runs them,
// the collectives, and the figures a run records. The parts take it by reference: the
// plan checks, the op runner, the segments, the IO thread, the pipelined stages, the
// variables, evaluation and the memory figures.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/exec/step_gate.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/aligned_block.h"
#include "engine/runtime/memory_account.h"
#include "engine/runtime/remote_store.h"
#include "engine/runtime/thread_pool.h"
#include "engine/runtime/world.h"
#include "engine/tensor/optimizer.h"
#include "planner/device_layout.h"
#include "planner/plan.h"
#include "planner/schedule.h"

namespace popkit::engine {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string shape_str(const std::vector<std::int64_t>& shape);

// What an op's wall time counts as.
OpCategory category(planner::OpKind k);
inline bool is_collective(planner::OpKind k) {
  return category(k) == OpCategory::kCollective;
}
// One replica's device (with a pipelined plan, one stage of it).
struct Device {
  // The device memory, one block (planner/device_layout.h): a tensor lives at the offset
  // first fit gives its alloc, so the step loop neither allocates nor faults pages in,
  // and the bytes a phase touches are about its planned peak.
  AlignedBlock block;
  std::optional<planner::FirstFit> fit;
  std::vector<std::byte*> tensors;  // by plan tensor index, in `block`; null when not live
  MemoryAccount account;
  PhaseSampler sampler;
  std::unique_ptr<RemoteStore> store;
  std::vector<double> losses;              // per accumulation step
  std::vector<std::vector<float>> logits;  // per repeat step (evaluation plans)
  // Time of this device's ops in the current segment, by category (its own thread).
  std::array<double, kNumOpCategories> segment_seconds{};
  // execution.io_schedule: preload, on the IO thread: this replica's piece of the
  // phase's preload loads is in flight, and the time it took (written by the IO thread
  // before the wait that reads it).
  bool preload_posted = false;
  double preload_seconds = 0.0;
  std::exception_ptr error;  // the first failure in the current segment ...
  std::size_t error_at = 0;  // ... and its position (step-major, then op)
  // Updated by compute threads and the IO thread: relaxed atomics.
  std::atomic<std::uint64_t> host_in{0}, host_out{0}, remote_in{0}, remote_out{0};
};

struct EngineState {
  // Checks the plan (engine/exec/plan_check.h), then sets up the devices of the
  // replicas this process hosts, the pool and the collectives.
  EngineState(planner::Plan p, EngineOptions o);

  planner::Plan plan;
  EngineOptions options;
  std::int64_t n_replicas = 1;  // R, over every rank
  // The processes of the run, and the replicas this one hosts (engine/runtime/world.h).
  std::shared_ptr<World> world;
  HostedReplicas hosted;
  // Pipelined: the stages, each on a device of its own.
  std::int64_t n_stages = 1;
  std::uint64_t block_bytes = 0;                 // each device's memory block (the largest stage's)
  std::vector<std::uint64_t> stage_block_bytes;  // pipelined: each stage's
  // The machine's cores, read once: std::thread::hardware_concurrency reads a file in
  // /sys on every call, and a phased step asks once per repeat.
  int n_cores = 1;
  std::unique_ptr<ThreadPool> pool;
  // How the plan runs on the pool (planner/schedule.h): the parts run what it says.
  planner::Schedule schedule;
  std::shared_ptr<Collectives> collectives;
  // Pipelined: each stage's collectives among the same stage of every replica.
  std::vector<std::shared_ptr<Collectives>> stage_collectives;
  // The hosted replicas' devices: one each, or with a pipelined plan one per stage,
  // replica r's stage s at (r - hosted.first) * n_stages + s.
  std::vector<std::unique_ptr<Device>> devices;
  std::optional<OptimizerKernel> optimizer;
  // The hot loops for this CPU (engine/kernels): chosen once per process.
  const Kernels& kern = kernels();
  std::int64_t steps_done = 0;
  // Whether the step being run may still be abandoned (step_gate.h): asked before each op.
  StepGate gate;
  // Over several processes, on the thread that calls MPI, before each collective and
  // before the segment of the step's first optimizer op, while the step may still be
  // abandoned: the ranks agree (any_rank) whether any of them was asked to stop
  // (EngineOptions::stop_requested), and if so every rank abandons the step there
  // (throws StepAbandoned). Every rank reaches these points in the same order and with
  // its gate alike (the same plan's ops came before), so the ranks call any_rank
  // together. In one process, or without stop_requested, it does nothing. Agreed to go
  // on `before_update`, the step's ops all run from there (StepGate::commit()).
  void agree_on_stop(bool before_update = false);
  std::int64_t image_size = 1;
  // The input is token ids (the first layer's kind reads tokens: dataset text), fed as
  // ids rather than normalised pixels.
  bool tokens = false;
  Timings timings;
  std::vector<std::vector<planner::PhaseMemory>> phase_memory;
  std::vector<std::vector<double>> last_losses;
  std::size_t current_phase = 0;         // the phase being run, for per-phase timings
  const BatchSource* batches = nullptr;  // during a step
  std::string where = "setup";           // the phase being run, for error messages

  [[nodiscard]] const planner::DeviceTensor& tensor(int t) const {
    return plan.tensors[static_cast<std::size_t>(t)];
  }
  // Replica r (a global index), hosted by this process, of a plan without stages.
  [[nodiscard]] Device& replica(std::int64_t r) const;
  // Replica r's device of stage s (s = 0 without pipelining).
  [[nodiscard]] Device& device(std::int64_t r, std::int64_t s) const;
  // The device of replica r that holds tensor t.
  [[nodiscard]] Device& holder(std::int64_t r, int t) const {
    return device(r, std::max(0, tensor(t).stage));
  }
  [[nodiscard]] std::int64_t local(std::int64_t r) const { return r - hosted.first; }

  void add_seconds(OpCategory c, double seconds);

  // task(r) for every replica this process hosts: as `run` says, one per pool thread
  // (kPool), or one after another on the caller (kInline).
  void on_every_replica(planner::SegmentRun run,
                        const std::function<void(std::int64_t)>& task) const;
  // A segment's time per category: the slowest device's.
  void add_slowest_segment_seconds();
  // The failure bulk-synchronous execution would report: the earliest position, then
  // the lowest replica.
  void rethrow_earliest_failure() const;
};

}  // namespace popkit::engine
