// `poprun train` and `poprun eval` as library functions: load and validate the config
// (diagnostics and exit 2 when invalid), run, print the summary; the CLI only parses
// arguments. Run-time failures throw popkit::Error (the tool prints it, exit 1).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "runner/evaluate.h"
#include "runner/trainer.h"

namespace popkit::runner {

inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

struct TrainCommand {
  std::string config;
  std::vector<std::string> overrides;  // --set key=value
  TrainOptions options;
  std::string io_thread = "auto";  // --io-thread: auto, on or off (options.io_overlap)
  bool quiet = false;
  bool verbose = false;         // under mpirun: every rank prints, not rank 0 alone
  std::string format = "text";  // the summary: text or json (train_summary_json)
};

// Trains; SIGINT/SIGTERM finish the step, write a checkpoint and return 130 with a
// line saying where it is. Returns 0, 2 (invalid config) or 130.
int run_train_command(const TrainCommand& command, std::ostream& out, std::ostream& err);

struct EvalCommand {
  std::string config;
  std::vector<std::string> overrides;
  EvalOptions options;
  bool verbose = false;
  std::string format = "text";  // text or json
};

// Prints the test set's loss and accuracy. Returns 0 or 2 (invalid config).
int run_eval_command(const EvalCommand& command, std::ostream& out, std::ostream& err);

// The final summary: steps, loss, test accuracy, throughput, peak device memory per
// replica planned and measured, where the run file and the checkpoint are.
void print_train_summary(std::ostream& out, const TrainResult& result);
// The same figures as JSON, one object, for scripts (`poprun train --format json`).
nlohmann::json train_summary_json(const TrainResult& result);

}  // namespace popkit::runner
