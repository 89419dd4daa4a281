// Plans, engine options and the checks before a run's engines exist. See run_setup.h.
#include "runner/run_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/error.h"
#include "base/units.h"
#include "engine/runtime/world.h"
#include "planner/build.h"
#include "planner/estimate_check.h"
#include "planner/host_memory.h"
#include "runner/agreement.h"

namespace popkit::runner {

planner::Plan plan_of(const config::Config& config, planner::Program program,
                      const planner::Plan* eval) {
  planner::Plan plan = planner::build_plan(config, program, eval);
  if (!plan.fits)
    throw Error("the {}plan of '{}' does not fit: phase '{}' needs {} more than the {} per replica",
                program == planner::Program::kEval ? "evaluation " : "", config.name,
                plan.not_fitting.phase, format_bytes(plan.not_fitting.bytes_over),
                format_bytes(plan.memory_per_replica));
  // Every rank plans alike, so every rank refuses alike; the first says why.
  if (const std::string why = planner::estimate_problem(plan); !why.empty())
    throw AgreedError(why, engine::process_world().rank() == 0, 2);
  return plan;
}

engine::EngineOptions engine_options(const config::Config& config, int n_threads,
                                     engine::IoOverlap io_overlap) {
  engine::EngineOptions o;
  o.n_threads = n_threads;
  o.io_overlap = io_overlap;
  o.normalize_mean = config.data.normalize_mean;
  o.normalize_std = config.data.normalize_std;
  return o;
}

void check_dataset(const engine::Dataset& data, const planner::Plan& plan) {
  const auto& shape = plan.input_shape;
  std::int64_t cols = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
  if (shape.empty() || data.rows != shape.front() || data.cols != cols)
    throw Error("{}: images of shape [{}, {}], but model.input_shape is [{}]",
                data.source.empty() ? data.name : data.source, data.rows, data.cols,
                fmt::join(shape, ", "));
  const auto top = std::max_element(data.labels.begin(), data.labels.end());
  if (top != data.labels.end() && *top >= plan.n_classes)
    throw Error(
        "{}: sample {} has label {}, but the last layer has out_features {}: labels must "
        "be below it",
        data.name, top - data.labels.begin(), *top, plan.n_classes);
}

void check_test_set(const engine::Dataset& test) {
  if (test.n == 0)
    throw Error("{}: 0 test samples: evaluating the model needs at least one", test.name);
}

void check_host_memory(const planner::Plan& plan, const planner::Plan* eval,
                       const config::Config& config, const engine::World& world) {
  const bool training = plan.program == planner::Program::kTrain;
  planner::DatasetSizes data;
  if (training) data.train = engine::peek_dataset_size(config, engine::Split::kTrain);
  data.test = engine::peek_dataset_size(config, engine::Split::kTest);
  const planner::HostUse use = training ? planner::HostUse::kTrain : planner::HostUse::kEvaluate;
  const auto estimate = [&](bool writer) {
    const planner::ProcessShare share{world.size(), writer, !world.library().empty(),
                                      world.local_size()};
    return planner::estimate_host_memory(plan, eval, config, data, use, share);
  };
  const auto available = planner::available_host_memory();
  const std::string why =
      world.size() == 1 && world.library().empty()
          ? planner::host_memory_problem(estimate(true), available)
          : planner::ranks_memory_problem({estimate(false), estimate(true), world.local_size()},
                                          available);
  if (!why.empty())
    throw InputRefused("{}; POPKIT_HOST_MEMORY=SIZE overrides what poprun takes as available", why);
}

void check_ranks_host(const planner::Plan& plan, const engine::World& world) {
  try {
    (void)engine::hosted_replicas(plan.replication_factor, world.rank(), world.size());
  } catch (const Error& e) {
    throw InputRefused(e.what());
  }
  if (world.size() > 1 && plan.pipeline && plan.pipeline->stages.size() > 1)
    throw InputRefused(
        "the plan of '{}' is pipelined ({} stages): its stage workers run as threads of one "
        "process, not over {} ranks; run it in one process (without --processes or mpirun)",
        plan.name, plan.pipeline->stages.size(), world.size());
}

}  // namespace popkit::runner
