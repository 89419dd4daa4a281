// Pipelined execution (issue 16, docs/pipelining.md): a worker thread per (replica,
// stage) runs its stage's program on its own device. Stages hand activations and
// gradients over through receive buffers (mailboxes), the same stage of every replica
// meets around its collectives, and under a sync pattern a group's devices meet at the
// pipeline's cycles (planner/sync_groups.h PipelineCycles).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/exec/op_runner.h"
#include "engine/exec/state.h"
#include "planner/sync_groups.h"

namespace popkit::engine {

class StagePipeline {
 public:
  // Sets up the mailboxes, the stages' barriers and the sync pattern's cycles.
  StagePipeline(EngineState& state, const OpRunner& ops);
  ~StagePipeline();
  StagePipeline(const StagePipeline&) = delete;
  StagePipeline& operator=(const StagePipeline&) = delete;

  // One execution of the plan's phases (one per stage) over the batch `source` serves,
  // with their timings, memory samples and the step's bubble.
  void run_step(const BatchSource& source);

 private:
  struct Mailbox;
  class StageBarrier;
  struct StageRun;

  Mailbox& mailbox(std::int64_t r, std::int64_t to, std::int64_t from) const;
  void abort_workers();
  void send(const planner::Op& op, std::int64_t r, std::int64_t stage);
  void receive(const planner::Op& op, std::int64_t r, std::int64_t stage);
  StageRun run_stage(std::size_t p, std::int64_t r);
  void record_step(const std::vector<StageRun>& runs, double step_seconds);

  EngineState& m_;
  const OpRunner& ops_;
  std::vector<std::unique_ptr<StageBarrier>> stage_barriers_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::atomic<bool> abort_{false};
  // Under a sync pattern: the cycles, a barrier per meeting group, and the group
  // meetings of this step.
  std::optional<planner::PipelineCycles> cycles_;
  std::vector<std::unique_ptr<StageBarrier>> cycle_barriers_;
  std::atomic<std::int64_t> cycle_meetings_{0};
};

}  // namespace popkit::engine
