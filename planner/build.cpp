// build_plan: Config -> Plan. Decides groupings, RTS sharding, variable homes and
// remote buffers, then makes each phase's (or pipeline stage's) program (see plan.h for
// what every op computes), and finally runs the memory walk and the cost model over the
// result. The work is split in parts with one job each (build_state.h lists them).
#include "planner/build.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "config/validate.h"
#include "planner/build_parts.h"
#include "planner/cost.h"
#include "planner/device_profile.h"
#include "planner/host_memory.h"
#include "planner/layers.h"
#include "planner/memory.h"
#include "planner/plan_text.h"
#include "planner/workspace.h"

namespace popkit::planner {
namespace {

using build::BuildState;
using config::ExecutionMode;

ReplicaGrouping to_grouping(const config::Config& c, const std::string& name) {
  const auto g = c.grouping(name);
  if (!g) throw Error("replication.groupings: unknown grouping '{}'", name);
  return {c.replication.factor, g->group_size, g->stride};
}

class Builder {
 public:
  // `report`: fill Plan::not_fitting when the plan does not fit (the tuner does not read it).
  Builder(const config::Config& c, Program program, bool report = true)
      : b_(c, program), report_(report) {}

  Plan build() {
    init_plan();
    add_layers();
    if (b_.c.pipeline.enabled()) build::place_stages(b_);
    build::add_variables(b_);
    if (b_.p.pipeline) {
      build::build_stages(b_);
      finish();
      return std::move(b_.p);
    }
    const build::Schedule schedule = build::plan_phases(b_);
    const build::Boundaries at = build::place_boundaries(b_, schedule);
    build::PhaseProgram program(b_, at);
    const config::Config& c = b_.c;
    if (!b_.eval && c.execution.mode == ExecutionMode::kStandard && c.remote.optimizer_state) {
      // The off-chip optimizer: training in one phase, then an optimizer phase that
      // loads, updates and stores the optimizer state; gradients stay on device between.
      program.build(schedule.names[0], schedule.phases[0], /*defer_optimizer=*/true);
      program.optimizer_phase("optimizer");
    } else {
      for (std::size_t p = 0; p < schedule.phases.size(); ++p)
        program.build(schedule.names[p], schedule.phases[p], false);
    }
    if (c.execution.io_schedule == config::IoSchedule::kPreload &&
        c.execution.mode == ExecutionMode::kPhased)
      build::preload_next_phase_loads(b_);
    add_workspace(b_.p);  // the kernels' scratch, around the ops that need it
    finish();
    return std::move(b_.p);
  }

 private:
  void init_plan() {
    const auto& t = b_.c.training;
    b_.p.name = b_.c.name;
    b_.p.program = b_.eval ? Program::kEval : Program::kTrain;
    b_.p.replication_factor = b_.c.replication.factor;
    // Evaluation: eval.micro_batch_size (else training's), and the training repeat count,
    // so a phased evaluation loads each layer's weights once per batch-serial loop.
    b_.mb =
        b_.eval && b_.c.eval.micro_batch_size > 0 ? b_.c.eval.micro_batch_size : t.micro_batch_size;
    b_.steps = t.gradient_accumulation;
    b_.p.micro_batch_size = b_.mb;
    b_.p.gradient_accumulation = b_.steps;
    b_.p.global_batch_size = b_.mb * b_.steps * b_.c.replication.factor;
    b_.p.input_shape = b_.c.model.input_shape;
    b_.p.mode = b_.c.execution.mode;
    b_.p.io_mode = b_.c.execution.io_mode;
    if (b_.p.io_mode == IoMode::kIoOverlapped && t.gradient_accumulation < 2) {
      // Overlap needs a next step to load while this one computes.
      b_.p.io_mode = IoMode::kIo;
      b_.p.warnings.push_back(fmt::format(
          "execution.io_mode: io_overlapped needs at least 2 steps per repeat loop, but "
          "training.gradient_accumulation is {}; using io",
          t.gradient_accumulation));
    }
    b_.p.variables_grouping = to_grouping(b_.c, b_.c.variables.grouping);
    b_.p.retrieval_mode = b_.c.variables.retrieval_mode;
    const std::string& sg =
        b_.c.sharding.grouping.empty() ? b_.c.variables.grouping : b_.c.sharding.grouping;
    b_.p.sharding_grouping = to_grouping(b_.c, sg);
    // A sharding group of one replica shards nothing: RTS is off then.
    b_.sharding_on = b_.c.sharding.enabled && b_.p.sharding_grouping.group_size > 1;
    b_.p.sharding_threshold = b_.sharding_on ? b_.c.sharding.threshold : 0;
    b_.p.optimizer = t.optimizer;
    b_.p.seed = t.seed;
    b_.p.sync_pattern = config::sync_pattern(b_.c);
  }

  void add_layers() {
    const auto& layers = b_.c.model.layers;
    if (layers.empty()) throw Error("model.layers: a model needs at least one layer");
    b_.n = static_cast<int>(layers.size());
    b_.p.layers = model_layers(b_.c.model);
    b_.p.init_seed = b_.c.model.init.seed;
    // Per graph, its layers in order (model_layers numbers graphs in order of appearance).
    for (int k = 0; k < b_.n; ++k) {
      const auto g = static_cast<std::size_t>(b_.layer(k).graph);
      if (g == b_.graph_layers.size()) b_.graph_layers.emplace_back();
      b_.graph_layers[g].push_back(k);
    }
    b_.p.positions = b_.p.layers.back().sequence;
    b_.p.n_classes = b_.p.layers.back().out_features / b_.p.positions;
    b_.params_before.assign(static_cast<std::size_t>(b_.n), false);
    for (int k = 1; k < b_.n; ++k)
      b_.params_before[static_cast<std::size_t>(k)] =
          b_.params_before[static_cast<std::size_t>(k - 1)] || b_.has_params(k - 1);
    // A graph of one layer is named after it; shared graphs are "inner", "inner2", ...
    int n_shared = 0;
    for (const auto& members : b_.graph_layers) {
      if (members.size() == 1) {
        b_.graph_names.push_back(b_.layer(members[0]).name);
      } else {
        ++n_shared;
        b_.graph_names.push_back(n_shared == 1 ? "inner" : fmt::format("inner{}", n_shared));
      }
    }
  }

  // ---- memory, cost, fit ----

  void finish() {
    annotate_costs(b_.p);
    const DeviceProfile* profile = device_profile(b_.c);
    b_.p.device_profile = profile->name;
    b_.p.device_kind = profile->is_cpu() ? "cpu" : "ipu";
    b_.p.device_core_round_trip_seconds = profile->core_round_trip_seconds;
    b_.p.device_cache_probe_seconds = profile->cache_probe_seconds;
    b_.p.memory_per_replica = b_.c.device.memory_per_replica != 0 ? b_.c.device.memory_per_replica
                                                                  : profile->memory_bytes;
    b_.p.io_tiles = b_.c.execution.io_tiles;
    // The memory walk and the host bytes first: on a CPU the cost model prices the cold
    // part of the remote store's copies from the bytes a step cycles through.
    const MemoryWalk walk = analyse_memory(b_.p);
    b_.p.host_bytes_per_step = 0;
    for (const auto& ph : b_.p.phases)
      for (const auto& o : ph.ops) b_.p.host_bytes_per_step += o.host_bytes;
    estimate_time(b_.p, *profile);
    b_.p.fits = b_.p.peak_bytes <= b_.p.memory_per_replica;
    if (!b_.p.fits && report_) report_not_fitting(walk);
  }

  void report_not_fitting(const MemoryWalk& walk) {
    NotFitting& nf = b_.p.not_fitting;
    nf.phase = b_.p.phases[static_cast<std::size_t>(b_.p.peak_phase)].name;
    nf.bytes_over = b_.p.peak_bytes - b_.p.memory_per_replica;
    const std::vector<int> live = live_tensors_at_peak(b_.p, walk, b_.p.peak_phase);
    for (std::size_t i = 0; i < live.size() && i < 5; ++i) {
      const DeviceTensor& t = b_.p.tensors[static_cast<std::size_t>(live[i])];
      nf.largest.push_back(fmt::format("{} ({})", t.name, format_bytes(t.nbytes)));
    }
    const ClassBytes& by =
        b_.p.phases[static_cast<std::size_t>(b_.p.peak_phase)].memory.peak_by_class;
    auto cls = [&](TensorClass c) { return by[static_cast<std::size_t>(c)]; };
    std::int64_t smallest_unsharded = 0;
    for (const auto& v : b_.p.variables)
      if (!v.sharded &&
          (v.cls == TensorClass::kWeights ? b_.c.sharding.weights : b_.c.sharding.optimizer_state))
        smallest_unsharded = std::max(smallest_unsharded, v.nelms);
    if (b_.c.replication.factor > 1 && !b_.sharding_on)
      nf.suggestions.push_back(fmt::format(
          "enable replicated tensor sharding (sharding:) to split weights and optimizer state "
          "over the replicas of a group"));
    else if (b_.sharding_on && smallest_unsharded > 0)
      nf.suggestions.push_back(fmt::format(
          "lower sharding.threshold (now {}) to at most {} so the largest unsharded variable "
          "is sharded too",
          b_.c.sharding.threshold, smallest_unsharded));
    if (!b_.c.remote.optimizer_state && cls(TensorClass::kOptimizerState) > 0)
      nf.suggestions.push_back(fmt::format(
          "remote.optimizer_state: true keeps the optimizer state ({}) in streaming memory",
          format_bytes(cls(TensorClass::kOptimizerState))));
    const bool standard = b_.c.execution.mode == ExecutionMode::kStandard;
    // Remote weights need phased execution (standard mode keeps weights on device).
    if (!b_.c.remote.weights && cls(TensorClass::kWeights) > 0)
      nf.suggestions.push_back(fmt::format(
          "remote.weights: true{} keeps the weights ({}) in streaming memory between uses",
          standard ? " with execution.mode: phased" : "",
          format_bytes(cls(TensorClass::kWeights))));
    if (standard && b_.n > 1)
      nf.suggestions.push_back(
          "execution.mode: phased holds one layer's variables and activations at a time");
    if (b_.p.io_mode == IoMode::kIoOverlapped)
      nf.suggestions.push_back("execution.io_mode: io needs one IO slot per stream instead of two");
    if (b_.mb > 1 && cls(TensorClass::kActivations) + cls(TensorClass::kIoSlots) > 0)
      nf.suggestions.push_back(fmt::format(
          "a smaller training.micro_batch_size (now {}) with a larger "
          "training.gradient_accumulation keeps the global batch with fewer activation bytes",
          b_.mb));
  }

  BuildState b_;
  bool report_;
};

}  // namespace

const DeviceProfile* device_profile(const config::Config& config) {
  if (!config.device.resolved)
    throw Error(
        "device.profile '{}' was not read: load the config with config/yaml (which reads the "
        "profile file), or set device.resolved in a config built in code",
        config.device.profile);
  return &*config.device.resolved;
}

Plan build_plan_for_estimate(const config::Config& config) {
  return Builder(config, Program::kTrain, /*report=*/false).build();
}

Plan build_plan(const config::Config& config, Program program, const Plan* eval,
                const NetworkProfile* network) {
  Plan plan = Builder(config, program).build();
  if (network != nullptr) {
    // Priced again with the network; the builder has checked the profile.
    estimate_time(plan, *device_profile(config), network);
  }
  const DatasetSizes sizes = dataset_sizes_from_config(config);
  if (program == Program::kEval) {
    plan.host_memory = estimate_host_memory(plan, nullptr, config, sizes, HostUse::kEvaluate);
  } else if (eval != nullptr) {
    plan.host_memory = estimate_host_memory(plan, eval, config, sizes, HostUse::kTrain);
  } else {
    // Training evaluates too: poprun holds the evaluation plan's engine beside training's.
    const Plan own = Builder(config, Program::kEval).build();
    plan.host_memory = estimate_host_memory(plan, &own, config, sizes, HostUse::kTrain);
  }
  return plan;
}

}  // namespace popkit::planner
