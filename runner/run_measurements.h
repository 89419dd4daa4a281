// The measured half of a run file: what the engines measured (memory and time per phase
// and replica, bytes moved, the processes), filled into the RunRecord that
// reports::record_from_plan began, and the figures of one step for metrics.jsonl.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "reports/run_record.h"
#include "runner/metrics_log.h"
#include "runner/run_dir.h"

namespace popkit::runner {

// Each phase's measured memory (per replica, the largest over the steps) and time (mean
// per step: an optimizer step, or an evaluation batch).
void add_phase_measurements(std::vector<reports::PhaseRecord>& phases, const engine::Timings& t,
                            const engine::MemoryReport& memory);

// The evaluation engine's measurements; `last` is its last evaluation.
void add_eval_measurements(reports::EvalRecord& record, const engine::Engine& eval,
                           const engine::EvalResult& last, std::int64_t evaluations);

// The measured half of the run file. Losses and step times are the whole run's: the
// earlier run's (`history`, when resumed) before this process's; so is the throughput.
// Phase times and memory are this process's.
void add_measurements(reports::RunRecord& record, const engine::Engine& engine,
                      const std::vector<double>& losses, const RunHistory& history);

// The figures of the step just done, for metrics.jsonl: its time, and each phase's from
// the engine's running sums (`before`: the sums before the step).
StepMetrics step_metrics(const engine::Engine& engine, const std::vector<std::string>& phase_names,
                         const std::vector<double>& before, std::int64_t step, std::int64_t epoch,
                         double loss, const config::Config& config);

}  // namespace popkit::runner
