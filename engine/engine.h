// The engine: an interpreter of a planner::Plan on CPU (DESIGN.md "The engine"). It holds
// R replicas, each with its own device tensors (allocated through a per-replica memory
// account exactly where the plan says), its own remote store, and runs the plan's ops in
// order, bulk-synchronously: a compute op runs on every replica in parallel on a thread
// pool, a collective runs across each group.
//
//   engine::Engine engine(plan, {.normalize_mean = cfg.data.normalize_mean, ...});
//   engine.initialize();
//   DatasetBatches batches(train, R, A, B);
//   for (step...) { batches.set_batch(order, step); double loss = engine.train_step(batches); }
//   engine::Engine eval(planner::build_plan(cfg, planner::Program::kEval), options);
//   eval.write_variable("fc1.weight", engine.read_variable("fc1.weight"));  // every variable
//   auto accuracy = eval.evaluate(test).accuracy;
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "config/config.h"
#include "engine/data/batch_source.h"
#include "engine/data/dataset.h"
#include "engine/runtime/collectives.h"
#include "planner/plan.h"
#include "planner/schedule.h"

namespace popkit::engine {

class World;

// io_overlapped and preload: who moves the data while the replicas compute
// (planner/schedule.h IoThreadUse: kAuto, kThread, kInline).
using IoOverlap = planner::IoThreadUse;

struct EngineOptions {
  int n_threads = 0;  // compute threads incl. the caller; 0 = the machine's; at most R when R > 1
  double normalize_mean = 0.1307;  // config.data: pixel x in [0, 1] -> (x - mean) / std
  double normalize_std = 0.3081;
  IoOverlap io_overlap = IoOverlap::kAuto;
  bool check_finite = true;                  // NaN/Inf in the loss or a gradient stops training
  std::shared_ptr<Collectives> collectives;  // null = the world's
  // The processes of the run (engine/runtime/world.h); null = process_world(). The
  // engine hosts the replicas its rank hosts.
  std::shared_ptr<World> world;
  // Fill every tensor with 0xFF bytes (a NaN) when it is allocated, for tests: an op that
  // reads a tensor before anything wrote it then shows in the results.
  bool poison_new_tensors = false;
  // Polled before each op of a training step until its update (its first optimizer op)
  // begins: true abandons the step (train_step throws StepAbandoned), leaving every
  // variable and the step counter as the previous step left them, so the step can be
  // taken again from a checkpoint of them, bitwise. Once the update began the step runs
  // to its end. Polled too before each op of an evaluation, which changes no variable:
  // true abandons it (evaluate throws EvaluationAbandoned). Empty: steps and evaluations
  // always run to their end. Over several processes a rank never abandons a step alone
  // (the others would wait for it in the step's next collective): it is polled before
  // each collective and before the update, where the ranks agree, and every rank
  // abandons the step when any was asked to (exec/state.h agree_on_stop), so every rank
  // must give it or leave it empty alike; an evaluation runs to its end.
  std::function<bool()> stop_requested;
};

// Engine::evaluate was abandoned (EngineOptions::stop_requested) part-way: no result.
class EvaluationAbandoned : public Error {
 public:
  EvaluationAbandoned() : Error("the evaluation was stopped before its end") {}
};

// Engine::train_step's step was abandoned (EngineOptions::stop_requested) before its
// update began: the engine holds the previous step's variables.
class StepAbandoned : public Error {
 public:
  explicit StepAbandoned(std::int64_t step)
      : Error("step {} was stopped before its update began", step), step_(step) {}
  // The step abandoned (1 for the engine's first).
  [[nodiscard]] std::int64_t step() const { return step_; }

 private:
  std::int64_t step_;
};

// What the op's wall time is counted as.
// kPipeline: sends and receives between the stages of a pipelined plan, waits included.
enum class OpCategory { kCompute, kCollective, kRemote, kHostIo, kMemory, kPipeline };
inline constexpr std::size_t kNumOpCategories = 6;

struct Timings {
  std::int64_t steps = 0;
  double setup_seconds = 0.0;
  std::vector<double> phase_seconds;  // per phase, summed over steps
  std::vector<double> step_seconds;   // per optimizer step
  // Summed over steps. Compute and collectives are wall time of the bulk-synchronous op;
  // in io_overlapped the IO thread's time is counted too, so the sum can exceed the wall.
  std::array<double, kNumOpCategories> category_seconds{};
  std::vector<std::array<double, kNumOpCategories>> phase_category_seconds;  // [phase][category]
  // A pipelined plan, per step: the stages' idle share while the pipeline runs, 1 - (time
  // the stages spent in their slots, not waiting for a neighbour) / (stages x the time
  // from the first slot's start to the last slot's end), beside the planned
  // (S - 1) / (GA + S - 1).
  std::vector<double> pipeline_bubble;
  // Waits at host and remote transfers that execution.sync_pattern asked for, summed over
  // steps: runs of a sync group's devices that start together (0 with single_pipeline).
  std::int64_t io_syncs = 0;
};

// Per replica, cumulative.
struct BytesMoved {
  std::uint64_t host_in = 0;     // host -> device (images, labels)
  std::uint64_t host_out = 0;    // device -> host (loss)
  std::uint64_t remote_in = 0;   // remote_load
  std::uint64_t remote_out = 0;  // remote_store
  std::uint64_t collective_sent = 0;
  std::uint64_t collective_received = 0;
  // The part of the two above that crossed between processes (mpirun ranks).
  std::uint64_t cross_process_sent = 0;
  std::uint64_t cross_process_received = 0;
};

struct MemoryReport {
  // [phase][replica], sampled as plan.h's PhaseMemory defines, the largest over the steps run.
  std::vector<std::vector<planner::PhaseMemory>> phases;
  std::vector<std::uint64_t> peak_bytes;         // per replica, whole program
  std::vector<std::uint64_t> always_live_bytes;  // per replica
  std::vector<std::uint64_t> streaming_bytes;    // per replica, all remote buffers
  std::vector<planner::ClassBytes> streaming_by_class;
};

// A language model's rows are its samples' positions (n samples of plan.positions each).
struct EvalResult {
  std::int64_t n = 0;        // samples
  std::int64_t rows = 0;     // rows scored: n, or n x positions
  std::int64_t correct = 0;  // rows whose largest logit is the label's
  double loss = 0.0;         // mean over rows
  double accuracy = 0.0;     // correct / rows
  std::int64_t batches = 0;  // executions of the evaluation plan's phases
  double seconds = 0.0;      // wall time
};

class Engine {
 public:
  // Refuses a plan with fits == false (popkit::Error with the planner's report) and a
  // plan whose shapes disagree with its layers; then runs `setup`.
  explicit Engine(const planner::Plan& plan, EngineOptions options = {});
  // The same, keeping `plan` instead of a copy: the copy of a phased plan of 10,000
  // layers is 590,000 allocations and 218 MB, most of the construction's time.
  explicit Engine(planner::Plan&& plan, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Every variable at the initial value the plan gives it (its kind's initialiser:
  // zeros, ones, or normal keyed by its name and the plan's init_seed), the same in
  // every group. Resets the optimizer step counter.
  void initialize();

  // One optimizer step over the global batch `batches` serves; returns the mean loss
  // over all replicas and accumulation steps. A training plan only. Throws StepAbandoned
  // when EngineOptions::stop_requested stopped it before its update.
  double train_step(const BatchSource& batches);

  // Runs an evaluation plan (planner::Program::kEval) over `data`, each replica its
  // share with its group's weights (EvalBatches), and scores the logits it streams out:
  // loss and accuracy over all samples. Timings and memory are recorded per phase as
  // in training, one "step" per batch. Throws EvaluationAbandoned on a stop request.
  EvalResult evaluate(const Dataset& data);
  // The same plan's logits for `data`, unscored: [n, positions, classes], sample after
  // sample (rows of samples another rank hosts are 0).
  std::vector<float> evaluation_logits(const Dataset& data);

  // Full values (meta shape, flat), gathered from the shards of the group.
  [[nodiscard]] std::vector<float> read_variable(const std::string& name,
                                                 std::int64_t group = 0) const;
  [[nodiscard]] std::vector<float> read_variable_of_replica(const std::string& name,
                                                            std::int64_t replica) const;
  // One value per group (one_per_group) or per replica (all_replicas), as the plan's
  // retrieval mode says.
  [[nodiscard]] std::vector<std::vector<float>> retrieve_variable(const std::string& name) const;
  void write_variable(const std::string& name, std::span<const float> values);  // every group
  void write_variable(const std::string& name, std::int64_t group, std::span<const float> values);
  [[nodiscard]] std::vector<std::string> variable_names() const;

  [[nodiscard]] MemoryReport memory_report() const;
  [[nodiscard]] const Timings& timings() const;
  [[nodiscard]] std::vector<BytesMoved> bytes_moved() const;
  // Losses of the last step, [replica][accumulation step].
  [[nodiscard]] const std::vector<std::vector<double>>& last_losses() const;

  // Adam's step counter t (optimizer steps done); checkpoints restore it.
  [[nodiscard]] std::int64_t steps_done() const;
  void set_steps_done(std::int64_t steps);

  [[nodiscard]] const planner::Plan& plan() const;
  // This process's rank and the ranks of the run; the rank hosting each replica.
  [[nodiscard]] int rank() const;
  [[nodiscard]] int n_ranks() const;
  [[nodiscard]] std::vector<int> replica_ranks() const;
  [[nodiscard]] int n_threads() const;
  // The bytes of each replica's device memory block (planner/device_layout.h): the planned
  // peak plus what first fit and alignment add.
  [[nodiscard]] std::uint64_t device_block_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes every variable of `to`'s plan, group by group, with `from`'s values of the same
// name: a training engine's weights into an evaluation engine (whose plan holds the
// weights and biases only).
void copy_weights(const Engine& from, Engine& to);

}  // namespace popkit::engine
