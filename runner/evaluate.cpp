// The test set's evaluation, and `poprun eval`'s of a checkpoint. See evaluate.h.
#include "runner/evaluate.h"

#include <cmath>

#include "base/error.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/world.h"
#include "runner/agreement.h"
#include "runner/checkpoint.h"
#include "runner/config_match.h"
#include "runner/outputs.h"
#include "runner/resolved_config.h"
#include "runner/run_measurements.h"
#include "runner/run_setup.h"

namespace popkit::runner {

engine::EvalResult evaluate_test_set(engine::Engine& eval, const engine::Dataset& test) {
  check_test_set(test);
  const engine::EvalResult total = eval.evaluate(test);
  // As in training (engine check_finite): a NaN or Inf loss is a failure, not a result.
  // The loss is >= 0, so the mean is finite exactly when every micro-batch's loss is.
  if (!std::isfinite(total.loss))
    throw Error("evaluation on {}: the mean loss over the {} samples is {}", test.name, total.n,
                std::isnan(total.loss) ? "NaN" : "Inf");
  return total;
}

namespace {

EvalOutcome evaluate_agreed(const config::Config& config, const EvalOptions& options,
                            SetupAgreement& agreement);

}  // namespace

EvalOutcome evaluate_checkpoint(const config::Config& config, const EvalOptions& options) {
  SetupAgreement agreement(engine::process_world());
  try {
    return evaluate_agreed(config, options, agreement);
  } catch (...) {
    agreement.fail();
  }
}

namespace {

EvalOutcome evaluate_agreed(const config::Config& config, const EvalOptions& options,
                            SetupAgreement& agreement) {
  engine::World& world = engine::process_world();
  const bool writer = world.rank() == 0;
  check_ranks_agree(world,
                    {{"--checkpoint", options.checkpoint},
                     {"-o/--output", options.run_file},
                     {"--force", options.force ? "given" : ""}},
                    "the command line");
  planner::Plan planned = plan_of(config, planner::Program::kEval);
  check_ranks_host(planned, world);
  if (!options.run_file.empty() && writer) {
    check_run_file_path(options.run_file);
    remove_stale_temporaries(std::nullopt, options.run_file);
  }
  check_host_memory(planned, nullptr, config, world);
  const LoadedCheckpoint ckpt = read_checkpoint(options.checkpoint, planned, Restore::kWeights);
  const engine::Dataset test_set = engine::load_dataset(config, engine::Split::kTest);
  check_dataset(test_set, planned);
  check_test_set(test_set);
  if (!options.force) check_eval_config(ckpt, options.checkpoint, config);
  agreement.reached();
  engine::Engine engine(std::move(planned), engine_options(config, options.n_threads));
  const planner::Plan& plan = engine.plan();
  engine.initialize();
  restore_checkpoint(engine, ckpt, options.checkpoint, Restore::kWeights);
  EvalOutcome out;
  try {
    out.test = evaluate_test_set(engine, test_set);
  } catch (const Error& e) {
    throw Error("{}: {}", options.checkpoint, e.what());
  }
  out.record = reports::record_from_plan(plan);
  out.record.config = resolved_config_json(config);
  out.record.test = reports::TestResult{out.test.accuracy, out.test.loss, out.test.n};
  out.record.environment = reports::current_environment(engine.n_threads());
  out.record.environment.kernels = engine::kernels_in_use();
  // No training ran: the run's phases are the evaluation plan's, under "eval".
  out.record.phases.clear();
  out.record.bytes_planned = {};
  out.record.eval = reports::eval_record_from_plan(plan);
  add_eval_measurements(*out.record.eval, engine, out.test, 1);
  if (!options.run_file.empty() && writer) reports::write_run_file(out.record, options.run_file);
  return out;
}

}  // namespace

}  // namespace popkit::runner
