// The plan's setup and its steps (program.h).
#include "engine/exec/program.h"

#include "base/error.h"
#include "planner/operands.h"

namespace popkit::engine {

Program::Program(EngineState& state)
    : m_(state), ops_(state), io_(state, ops_), segments_(state, ops_, io_) {
  if (m_.schedule.stage_workers) stages_ = std::make_unique<StagePipeline>(state, ops_);
}

void Program::setup() {
  const auto t0 = Clock::now();
  m_.where = "setup";
  if (m_.schedule.stage_workers) {
    // Each always-live tensor on its stage's device of every replica.
    for (const planner::Op& op : m_.plan.setup)
      for (std::int64_t r = m_.hosted.first; r < m_.hosted.first + m_.hosted.n; ++r)
        ops_.run_on(m_.holder(r, planner::the_tensor(op)), op, r, 0);
  } else {
    segments_.run_ops(m_.plan.setup, m_.schedule.setup, false);
  }
  m_.timings.setup_seconds = seconds_since(t0);
}

void Program::run_step(const BatchSource& source) {
  if (stages_) return stages_->run_step(source);
  const auto t_step = Clock::now();
  m_.batches = &source;
  const auto n_phases = m_.plan.phases.size();
  m_.timings.phase_seconds.resize(n_phases, 0.0);
  m_.timings.phase_category_seconds.resize(n_phases);
  m_.phase_memory.resize(n_phases,
                         std::vector<planner::PhaseMemory>(static_cast<std::size_t>(m_.hosted.n)));
  try {
    for (std::size_t p = 0; p < n_phases; ++p) {
      const auto& phase = m_.plan.phases[p];
      m_.where = fmt::format("phase '{}'", phase.name);
      const auto t0 = Clock::now();
      m_.current_phase = p;
      for (auto& dev : m_.devices) dev->sampler.begin(dev->account);
      io_.begin_phase(p);
      segments_.run_ops(phase.ops, m_.schedule.phases[p].ops, true);
      io_.finish_preloads();
      m_.timings.phase_seconds[p] += seconds_since(t0);
      for (std::size_t r = 0; r < m_.devices.size(); ++r) {
        const auto& m = m_.devices[r]->sampler.memory();
        auto& kept = m_.phase_memory[p][r];
        if (m.peak > kept.peak || m_.timings.steps == 0) kept = m;
      }
    }
  } catch (...) {
    try {
      io_.finish_preloads();  // a piece in flight writes this engine's memory
    } catch (...) {           // the first error stands
    }
    m_.batches = nullptr;
    throw;
  }
  m_.batches = nullptr;
  ++m_.timings.steps;
  m_.timings.step_seconds.push_back(seconds_since(t_step));
}

}  // namespace popkit::engine
