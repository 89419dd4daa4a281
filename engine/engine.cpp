// The engine's public face: its parts (engine/exec/) put together. The state they share
// (state.h) is set up first, the plan checked with it; then the variables and the
// program, whose setup allocates the always-live tensors.
#include "engine/engine.h"

#include "base/error.h"
#include "engine/exec/evaluate.h"
#include "engine/exec/figures.h"
#include "engine/exec/program.h"
#include "engine/exec/state.h"
#include "engine/exec/variables.h"
#include "engine/runtime/float_mode.h"
#include "engine/tensor/init.h"

namespace popkit::engine {

using planner::Variable;

struct Engine::Impl {
  Impl(planner::Plan plan, EngineOptions options)
      : state(std::move(plan), std::move(options)), variables(state), program(state) {
    program.setup();
  }

  void need_program(planner::Program want, const char* what) const {
    const planner::Plan& plan = state.plan;
    if (plan.program != want)
      throw Error("{} needs {} plan, but plan '{}' is {} plan", what,
                  want == planner::Program::kEval ? "an evaluation" : "a training", plan.name,
                  plan.program == planner::Program::kEval ? "an evaluation" : "a training");
  }

  double train_step(const BatchSource& source) {
    need_program(planner::Program::kTrain, "train_step");
    const planner::Plan& plan = state.plan;
    for (auto& dev : state.devices)
      dev->losses.assign(static_cast<std::size_t>(plan.gradient_accumulation), 0.0);
    {
      // Over several processes the ranks abandon a step together (EngineState::
      // agree_on_stop): a rank asked to stop skips its ops until they agree.
      const bool ranks = state.world->size() > 1;
      const StepGate::Step step(state.gate, &state.options.stop_requested, ranks);
      program.run_step(source);
    }
    ++state.steps_done;
    // Every replica's losses, in replica order on every rank (ranks host ascending blocks
    // of replicas), summed in that order as one process sums them.
    std::vector<double> mine;
    for (std::int64_t r = state.hosted.first; r < state.hosted.first + state.hosted.n; ++r) {
      const Device& dev = state.device(r, state.n_stages - 1);  // the stage with the loss
      mine.insert(mine.end(), dev.losses.begin(), dev.losses.end());
    }
    const auto all = all_gather_values(*state.world, std::span<const double>(mine));
    const auto per = static_cast<std::size_t>(plan.gradient_accumulation);
    POPKIT_ASSERT(all.size() == per * static_cast<std::size_t>(state.n_replicas));
    auto& last = state.last_losses;
    last.clear();
    double total = 0.0;
    for (std::size_t r = 0; r < static_cast<std::size_t>(state.n_replicas); ++r) {
      last.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * per),
                        all.begin() + static_cast<std::ptrdiff_t>((r + 1) * per));
      for (double l : last.back()) total += l;
    }
    return total / static_cast<double>(all.size());
  }

  EngineState state;
  Variables variables;
  Program program;
};

Engine::Engine(const planner::Plan& plan, EngineOptions options)
    : Engine(planner::Plan(plan), std::move(options)) {}

Engine::Engine(planner::Plan&& plan, EngineOptions options)
    : impl_(std::make_unique<Impl>(std::move(plan), std::move(options))) {}

Engine::~Engine() = default;

void Engine::initialize() {
  const FlushDenormals mode;  // the initial values round as the engine's threads would
  Impl& m = *impl_;
  const planner::Plan& plan = m.state.plan;
  for (const auto& v : plan.variables) {
    const planner::VariableInit& init = v.init;
    std::vector<float> values(static_cast<std::size_t>(v.nelms),
                              init.kind == planner::InitKind::kOnes ? 1.0f : 0.0f);
    if (init.kind == planner::InitKind::kNormal)
      fill_normal(values.data(), v.nelms, init.mean, init.std, name_key(v.name, plan.init_seed));
    for (std::int64_t g = 0; g < plan.variables_grouping.n_groups(); ++g)
      m.variables.write_group(v, g, values);
  }
  m.state.steps_done = 0;
}

double Engine::train_step(const BatchSource& batches) {
  const FlushDenormals mode;  // the caller computes too, as the pool's threads do
  return impl_->train_step(batches);
}

EvalResult Engine::evaluate(const Dataset& data) {
  const FlushDenormals mode;
  impl_->need_program(planner::Program::kEval, "evaluate");
  return engine::evaluate(impl_->state, impl_->program, data);
}

std::vector<float> Engine::evaluation_logits(const Dataset& data) {
  const FlushDenormals mode;
  impl_->need_program(planner::Program::kEval, "evaluation_logits");
  return engine::evaluation_logits(impl_->state, impl_->program, data);
}

std::vector<float> Engine::read_variable(const std::string& name, std::int64_t group) const {
  const Impl& m = *impl_;
  const auto& grouping = m.state.plan.variables_grouping;
  if (group < 0 || group >= grouping.n_groups())
    throw Error("variable '{}': group {} out of range ({} groups)", name, group,
                grouping.n_groups());
  return m.variables.read_replica(m.variables.find(name), grouping.member(group, 0));
}

std::vector<float> Engine::read_variable_of_replica(const std::string& name,
                                                    std::int64_t replica) const {
  const Impl& m = *impl_;
  if (replica < 0 || replica >= m.state.n_replicas)
    throw Error("variable '{}': replica {} out of range (R = {})", name, replica,
                m.state.n_replicas);
  return m.variables.read_replica(m.variables.find(name), replica);
}

std::vector<std::vector<float>> Engine::retrieve_variable(const std::string& name) const {
  const planner::Plan& plan = impl_->state.plan;
  std::vector<std::vector<float>> out;
  if (plan.retrieval_mode == config::RetrievalMode::kAllReplicas) {
    for (std::int64_t r = 0; r < impl_->state.n_replicas; ++r)
      out.push_back(read_variable_of_replica(name, r));
  } else {
    for (std::int64_t g = 0; g < plan.variables_grouping.n_groups(); ++g)
      out.push_back(read_variable(name, g));
  }
  return out;
}

void Engine::write_variable(const std::string& name, std::span<const float> values) {
  Impl& m = *impl_;
  const Variable& v = m.variables.find(name);
  for (std::int64_t g = 0; g < m.state.plan.variables_grouping.n_groups(); ++g)
    m.variables.write_group(v, g, values);
}

void Engine::write_variable(const std::string& name, std::int64_t group,
                            std::span<const float> values) {
  Impl& m = *impl_;
  m.variables.write_group(m.variables.find(name), group, values);
}

std::vector<std::string> Engine::variable_names() const {
  std::vector<std::string> out;
  for (const auto& v : impl_->state.plan.variables) out.push_back(v.name);
  return out;
}

MemoryReport Engine::memory_report() const {
  return engine::memory_report(impl_->state);
}

const Timings& Engine::timings() const {
  return impl_->state.timings;
}

std::vector<BytesMoved> Engine::bytes_moved() const {
  return engine::bytes_moved(impl_->state);
}

int Engine::rank() const {
  return impl_->state.world->rank();
}
int Engine::n_ranks() const {
  return impl_->state.world->size();
}
std::vector<int> Engine::replica_ranks() const {
  const EngineState& m = impl_->state;
  std::vector<int> out;
  for (std::int64_t r = 0; r < m.n_replicas; ++r)
    out.push_back(rank_of_replica(r, m.n_replicas, m.world->size()));
  return out;
}

const std::vector<std::vector<double>>& Engine::last_losses() const {
  return impl_->state.last_losses;
}
std::int64_t Engine::steps_done() const {
  return impl_->state.steps_done;
}
void Engine::set_steps_done(std::int64_t steps) {
  impl_->state.steps_done = steps;
}
const planner::Plan& Engine::plan() const {
  return impl_->state.plan;
}
std::uint64_t Engine::device_block_bytes() const {
  return impl_->state.block_bytes;
}

int Engine::n_threads() const {
  return impl_->state.pool->size();
}

void copy_weights(const Engine& from, Engine& to) {
  const planner::Plan& plan = to.plan();
  for (const Variable& v : plan.variables)
    for (std::int64_t g = 0; g < plan.variables_grouping.n_groups(); ++g)
      to.write_variable(v.name, g, from.read_variable(v.name, g));
}

}  // namespace popkit::engine
