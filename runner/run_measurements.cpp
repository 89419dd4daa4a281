// The measured half of a run file, and a step's metrics. See run_measurements.h.
#include "runner/run_measurements.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/kernels/kernels.h"
#include "engine/runtime/world.h"

namespace popkit::runner {
namespace {

// Which rank hosted each replica, and the bytes that crossed between ranks per replica
// per step (mean): for a run over several processes only.
std::optional<reports::Processes> processes_of(const engine::Engine& engine,
                                               const std::vector<engine::BytesMoved>& moved,
                                               std::int64_t steps) {
  if (engine.n_ranks() == 1) return std::nullopt;
  reports::Processes p;
  p.ranks = engine.n_ranks();
  p.mpi = engine::process_world().library();
  for (const int k : engine.replica_ranks()) p.replica_ranks.push_back(k);
  std::uint64_t total = 0;
  for (const auto& b : moved) total += b.cross_process_sent + b.cross_process_received;
  p.cross_process_bytes =
      total / (static_cast<std::uint64_t>(std::max<std::size_t>(1, moved.size())) *
               static_cast<std::uint64_t>(std::max<std::int64_t>(1, steps)));
  return p;
}

}  // namespace

void add_phase_measurements(std::vector<reports::PhaseRecord>& phases, const engine::Timings& t,
                            const engine::MemoryReport& memory) {
  const auto steps = static_cast<double>(std::max<std::int64_t>(1, t.steps));
  for (std::size_t p = 0; p < phases.size(); ++p) {
    auto& phase = phases[p];
    phase.measured.clear();
    if (p < memory.phases.size())
      for (const auto& m : memory.phases[p])
        phase.measured.push_back(reports::memory_from_phase(m));
    if (p < t.phase_seconds.size()) phase.measured_seconds = t.phase_seconds[p] / steps;
  }
  for (std::size_t p = 0; p < phases.size() && p < t.phase_category_seconds.size(); ++p) {
    const auto& c = t.phase_category_seconds[p];
    const auto per_step = [&](engine::OpCategory k) {
      return c[static_cast<std::size_t>(k)] / steps;
    };
    phases[p].measured_by_kind = {
        per_step(engine::OpCategory::kCompute), per_step(engine::OpCategory::kCollective),
        per_step(engine::OpCategory::kRemote), per_step(engine::OpCategory::kHostIo),
        per_step(engine::OpCategory::kPipeline)};
  }
}

void add_eval_measurements(reports::EvalRecord& record, const engine::Engine& eval,
                           const engine::EvalResult& last, std::int64_t evaluations) {
  add_phase_measurements(record.phases, eval.timings(), eval.memory_report());
  record.n_samples = last.n;
  record.evaluations = evaluations;
  record.batches = last.batches;
  record.seconds = last.seconds;
  record.samples_per_second = last.seconds > 0 ? static_cast<double>(last.n) / last.seconds : 0.0;
}

void add_measurements(reports::RunRecord& record, const engine::Engine& engine,
                      const std::vector<double>& losses, const RunHistory& history) {
  const engine::Timings& t = engine.timings();
  const engine::MemoryReport memory = engine.memory_report();
  add_phase_measurements(record.phases, t, memory);
  record.streaming_measured = memory.streaming_bytes;
  record.step_seconds = history.step_seconds;
  record.step_seconds.insert(record.step_seconds.end(), t.step_seconds.begin(),
                             t.step_seconds.end());
  record.loss = history.loss;
  record.loss.insert(record.loss.end(), losses.begin(), losses.end());
  record.first_step = history.first_step;
  const std::int64_t n = static_cast<std::int64_t>(record.step_seconds.size());
  record.throughput = reports::throughput_from_steps(
      record.step_seconds, engine.plan().global_batch_size, std::min<std::int64_t>(10, n / 5));
  const auto moved = engine.bytes_moved();
  reports::BytesMoved mean;
  for (const auto& b : moved) {
    mean.host += b.host_in + b.host_out;
    mean.remote += b.remote_in + b.remote_out;
    mean.collective += b.collective_sent + b.collective_received;
  }
  const auto per = static_cast<std::uint64_t>(std::max<std::size_t>(1, moved.size())) *
                   static_cast<std::uint64_t>(std::max<std::int64_t>(1, t.steps));
  record.bytes_measured = {mean.host / per, mean.remote / per, mean.collective / per};
  record.environment = reports::current_environment(engine.n_threads());
  record.environment.kernels = engine::kernels_in_use();
  record.processes = processes_of(engine, moved, t.steps);
  if (const auto& pp = engine.plan().pipeline; pp && !t.pipeline_bubble.empty()) {
    std::vector<double> b = t.pipeline_bubble;
    std::nth_element(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(b.size() / 2), b.end());
    record.pipeline =
        reports::PipelineRecord{static_cast<std::int64_t>(pp->stages.size()), pp->planned_bubble,
                                pp->estimated_bubble, b[b.size() / 2]};
  }
}

StepMetrics step_metrics(const engine::Engine& engine, const std::vector<std::string>& phase_names,
                         const std::vector<double>& before, std::int64_t step, std::int64_t epoch,
                         double loss, const config::Config& config) {
  const engine::Timings& t = engine.timings();
  StepMetrics m;
  m.step = step;
  m.epoch = epoch;
  m.loss = loss;
  m.step_seconds = t.step_seconds.empty() ? 0.0 : t.step_seconds.back();
  m.samples_per_second = m.step_seconds > 0
                             ? static_cast<double>(engine.plan().global_batch_size) / m.step_seconds
                             : 0.0;
  m.learning_rate = config.training.optimizer.lr;
  for (std::size_t p = 0; p < phase_names.size() && p < t.phase_seconds.size(); ++p)
    // The difference of two running sums, rounded to the clock's nanoseconds: no 1e-21
    // residue of the subtraction in the log.
    m.phase_seconds.emplace_back(
        phase_names[p],
        std::round((t.phase_seconds[p] - (p < before.size() ? before[p] : 0.0)) * 1e9) / 1e9);
  return m;
}

}  // namespace popkit::runner
