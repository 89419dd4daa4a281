// The run file: what `poprun` measured in one run, beside what the plan predicted
// (schemas/run.schema.json). reports/ owns this format: poprun fills a RunRecord and
// calls write_run_file; popreport reads it back with run_record_from_json. Memory
// figures are per replica in bytes; times are seconds per optimizer step unless a
// name says otherwise.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/json_text.h"
#include "planner/plan.h"

namespace popkit::reports {

inline constexpr int kRunFileVersion = 1;

// Device memory of one replica in one phase (planner::PhaseMemory's figures):
// not_always_live = peak - always_live; by_class at the first sample that reaches peak.
struct Memory {
  std::uint64_t always_live = 0;
  std::uint64_t not_always_live = 0;
  std::uint64_t peak = 0;
  planner::ClassBytes by_class{};
};

// Where a phase's time went, by the kind of its ops.
struct OpKindSeconds {
  double compute = 0.0;     // forward, loss, backward, optimizer step, zero, slice
  double collective = 0.0;  // all-gather, reduce-scatter, all-reduce
  double remote = 0.0;      // remote load and store (streaming memory)
  double host_io = 0.0;     // host load and store
  // A pipelined run: sends and receives between stages, with the waits for the
  // neighbour (in the run file only when not 0).
  double pipeline = 0.0;
};

struct PhaseRecord {
  std::string name;
  Memory planned;
  std::vector<Memory> measured;    // one per replica, in replica order; empty for a plan
  double planned_seconds = 0.0;    // the plan's estimate, per optimizer step
  double measured_seconds = 0.0;   // mean per optimizer step
  OpKindSeconds measured_by_kind;  // mean per optimizer step
};

// Bytes moved per replica per optimizer step, by kind.
struct BytesMoved {
  std::uint64_t host = 0;
  std::uint64_t remote = 0;
  std::uint64_t collective = 0;  // sent + received
};

// samples/s of each step = global_batch_size / step seconds; median, min and max over
// the steps after the first `warmup_steps`.
// The cache probes of a run: as its steps began and as they ended, and the least and
// the most of every probe, those between its steps included; n of them.
struct CacheProbes {
  double start_seconds = 0.0, end_seconds = 0.0;
  double min_seconds = 0.0, max_seconds = 0.0;
  std::int64_t n = 0;
  void add(double seconds) {
    if (n == 0) start_seconds = min_seconds = max_seconds = seconds;
    min_seconds = std::min(min_seconds, seconds);
    max_seconds = std::max(max_seconds, seconds);
    end_seconds = seconds;
    ++n;
  }
};

struct Throughput {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
  std::int64_t warmup_steps = 0;
};

struct TestResult {
  double accuracy = 0.0;  // fraction in [0, 1]
  double loss = 0.0;
  std::int64_t n_samples = 0;
};

// An evaluation of the test set while the run trained (eval.every), after `step`, the
// last step of epoch `epoch` (from 1).
struct Evaluation {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  TestResult result;
};

// Evaluation runs a plan of its own (planner::Program::kEval): its phases, planned and
// as measured over the batches of the evaluations run (times: mean per batch), and its
// speed. A batch is one execution of the phases: batch_size samples, all replicas.
struct EvalRecord {
  std::int64_t micro_batch_size = 1;
  std::int64_t batch_size = 1;
  std::uint64_t peak_bytes = 0;  // planned, per replica
  double estimated_samples_per_second = 0.0;
  std::vector<PhaseRecord> phases;
  std::int64_t n_samples = 0;       // per evaluation (the test set)
  std::int64_t evaluations = 0;     // run
  std::int64_t batches = 0;         // per evaluation
  double seconds = 0.0;             // wall time of the last evaluation
  double samples_per_second = 0.0;  // n_samples / seconds, of the last evaluation
};

struct CheckpointRecord {
  std::string path;
  std::int64_t step = 0;
};

// The run a resumed run continued: its folder, its run file (whose losses and step
// times were prepended to this run's; "" when none was found) and the checkpoint.
struct ResumedFrom {
  std::string run_dir;
  std::string run_file;
  std::string checkpoint;
  std::int64_t step = 0;  // the checkpoint's: the steps done before this run
};

struct Environment {
  std::string cpu_model;
  std::int64_t n_cores = 0;
  std::int64_t n_threads = 0;
  std::string compiler;
  std::string build_type;
  std::string git_revision;
  std::string popkit_version;
  // The engine's kernel level (engine/kernels): "x86-64-v4 (AVX-512), chosen from
  // cpuid". Empty in run files written before it was recorded.
  std::string kernels;
  // Where the machine had put its CPUs as the steps began and as they ended: a cache
  // line's round trip between two of them (runner/placement.h). 0: not measured (one
  // CPU, the end of a run stopped by a signal, or a run file from before).
  double core_round_trip_start_seconds = 0.0;
  double core_round_trip_end_seconds = 0.0;
  // How much of the last-level cache the host left the threads while the steps ran: the
  // cache probe's seconds (runner/calibrate.h). Not measured (n == 0) when the plan's
  // profile had no probe to compare with, or in a run file from before.
  CacheProbes cache_probes{};
};

// A run over several processes (mpirun -np N): which rank hosted each replica, and the
// bytes per replica per optimizer step (mean, sent + received) that crossed between
// processes. Absent for a run in one process.
struct Processes {
  std::int64_t ranks = 1;
  std::string mpi;                          // the MPI library, "Open MPI v4.1.4"
  std::vector<std::int64_t> replica_ranks;  // per replica, in replica order
  std::uint64_t cross_process_bytes = 0;
};

// A pipelined run: the stages and the bubble (the stages' idle share while the pipeline
// runs), planned with equal stage times, estimated from the cost model's stage times, and
// measured (the median over the steps). Absent without pipelining.
struct PipelineRecord {
  std::int64_t stages = 1;
  double planned_bubble = 0.0;
  double estimated_bubble = 0.0;
  double measured_bubble = 0.0;
};

// The plan's headline figures, copied into the run file so a run reads on its own.
struct PlanSummary {
  std::string name;
  std::int64_t replication_factor = 1;
  std::int64_t micro_batch_size = 1;
  std::int64_t gradient_accumulation = 1;
  std::int64_t global_batch_size = 1;
  std::string execution_mode;           // "phased" | "standard"
  std::string io_mode;                  // "compute" | "io" | "io_overlapped"
  std::int64_t sharding_threshold = 0;  // 0 = sharding off
  std::string device_profile;
  std::string device_kind = "ipu";              // the plan's: "cpu" when the profile is a CPU's
  double device_core_round_trip_seconds = 0.0;  // the plan's (planner/plan.h); 0: none
  double device_cache_probe_seconds = 0.0;      // the plan's (planner/plan.h); 0: none
  std::uint64_t memory_per_replica = 0;
  bool fits = true;
  std::uint64_t peak_bytes = 0;
  std::uint64_t always_live_bytes = 0;
  std::uint64_t streaming_bytes = 0;
  double estimated_step_seconds = 0.0;
  double estimated_samples_per_second = 0.0;
};

struct RunRecord {
  int version = kRunFileVersion;
  std::string name;
  nlohmann::json config = nlohmann::json::object();  // the config as resolved
  PlanSummary plan;
  std::vector<PhaseRecord> phases;
  std::uint64_t streaming_planned = 0;            // per replica
  std::vector<std::uint64_t> streaming_measured;  // one per replica
  // Per optimizer step, in order, of the whole run: a resumed run's start with the
  // earlier run's steps, so loss[i] is step first_step + i + 1.
  std::vector<double> step_seconds;
  std::vector<double> loss;     // mean over micro-batches and replicas
  std::int64_t first_step = 0;  // > 0 only when a resumed run found no earlier history
  std::string run_dir;          // the run's folder; "" in older files and for poprun eval
  // The command line that started the run (the tool's name first) and the config's hash
  // (runner/resolved_config.h, as its checkpoints carry it); empty in older files.
  std::vector<std::string> command;
  std::string config_hash;
  std::optional<ResumedFrom> resumed_from;  // absent for a run started from scratch
  Throughput throughput;
  std::optional<TestResult> test;
  // The evaluations while it trained, in step order, a resumed run's starting with the
  // earlier run's up to its checkpoint; `test` is the final one.
  std::vector<Evaluation> evaluations;
  std::optional<EvalRecord> eval;      // absent when no evaluation plan ran (older files)
  std::optional<Processes> processes;  // absent for a run in one process
  std::optional<PipelineRecord> pipeline;
  BytesMoved bytes_planned;   // per replica per optimizer step
  BytesMoved bytes_measured;  // per replica per optimizer step (mean)
  std::vector<CheckpointRecord> checkpoints;
  Environment environment;
};

// One phase's memory as the planner (planned) or the engine (measured) counts it.
Memory memory_from_phase(const planner::PhaseMemory& m);

// The plan's summary and its planned per-phase figures, ready for poprun to add
// measurements to.
PlanSummary plan_summary(const planner::Plan& plan);
RunRecord record_from_plan(const planner::Plan& plan);
// The planned half of an evaluation plan's record.
EvalRecord eval_record_from_plan(const planner::Plan& plan);

// Bytes moved per replica per optimizer step as the plan counts them (its phases' ops).
BytesMoved planned_bytes_moved(const planner::Plan& plan);

// The median of `values` (the mean of the middle two when even; 0 when empty), in linear
// time: a run file's step times number millions.
double median(std::vector<double> values);

// median / min / max of global_batch_size / step_seconds[i] over i >= warmup_steps;
// warm-up shrinks so that at least one step counts. Empty input gives zeros.
Throughput throughput_from_steps(const std::vector<double>& step_seconds,
                                 std::int64_t global_batch_size, std::int64_t warmup_steps);

// This machine and build: CPU model (from /proc/cpuinfo), cores, the given thread
// count, compiler, build type, git revision, popkit version.
Environment current_environment(std::int64_t n_threads);

nlohmann::json run_record_to_json(const RunRecord& record);

// Reads the big arrays of a run file element by element while the text is parsed
// (planner/json_text.h): each phase's measured memory (one per replica), and the loss
// and step time of every step (a float each, where a JSON value takes 16 bytes and more).
class RunSplit final : public planner::JsonSplit {
 public:
  explicit RunSplit(std::string filename) : filename_(std::move(filename)) {}
  std::optional<std::uint64_t> begin_array(const planner::JsonPath& path) override;
  void element(std::uint64_t array, std::size_t index, nlohmann::json&& value) override;
  planner::SplitArrays<Memory>& measured_memory() { return measured_memory_; }
  planner::SplitArrays<double>& step_seconds() { return step_seconds_; }
  planner::SplitArrays<double>& loss() { return loss_; }

 private:
  std::string filename_;
  planner::SplitArrays<Memory> measured_memory_{0, 3};
  planner::SplitArrays<double> step_seconds_{1, 3};
  planner::SplitArrays<double> loss_{2, 3};
};

// Throws InputError naming `filename` and the field: a missing or ill-typed field,
// `kind` other than "run", or a version newer than kRunFileVersion. `split`: the one
// `json` was parsed with, if any.
RunRecord run_record_from_json(const nlohmann::json& json, const std::string& filename,
                               RunSplit* split = nullptr);

// A run file's text; throws InputError, "FILE:LINE:COLUMN: ..." for text that is not JSON.
RunRecord run_record_from_text(std::string_view text, const std::string& filename);

// Writes the run file atomically (".NAME.tmp-<pid>" beside it, fsync, then rename); throws
// popkit::Error with the reason, and removes the temporary, when any step fails.
void write_run_file(const RunRecord& record, const std::string& path);

}  // namespace popkit::reports
