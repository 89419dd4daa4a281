// Evaluation: the test set's loss and accuracy on an engine of a config's evaluation plan,
// from the engine a run trains (its weights copied over) or from a checkpoint's weights
// (`poprun eval`), with a run file of the result when asked.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "engine/engine.h"
#include "reports/run_record.h"

namespace popkit::runner {

// The test set's loss and accuracy on an engine of the config's evaluation plan
// (planner::Program::kEval): each replica evaluates a contiguous share with its group's
// weights, in micro-batches of eval.micro_batch_size (or the training one). A NaN or Inf
// loss is an error.
engine::EvalResult evaluate_test_set(engine::Engine& eval, const engine::Dataset& test);

struct EvalOptions {
  std::string checkpoint;  // required
  std::string run_file;    // "" = do not write one
  int n_threads = 0;
  bool force = false;  // evaluate a checkpoint of another config (runner/config_match.h)
};

struct EvalOutcome {
  engine::EvalResult test;
  reports::RunRecord record;
};

// Loads the checkpoint's weights into the config's evaluation plan and evaluates the
// test set; writes a run file with the result when asked (its "eval" holds the plan's
// phases, planned and measured).
EvalOutcome evaluate_checkpoint(const config::Config& config, const EvalOptions& options);

}  // namespace popkit::runner
