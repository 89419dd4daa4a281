// The training driver: runs a config's plan on the engine over epochs of its dataset,
// evaluates on the test set, checkpoints, resumes, and fills the run file.
//
//   auto config = config::load_config_file("examples/quick.yaml").config;
//   runner::Progress progress(std::cerr, runner::ProgressStyle::kLines);
//   auto result = runner::train(*config, {.steps = 10}, progress);
//   // result.test->accuracy, result.run_file, result.checkpoint
//
// Batch rules: a global batch is micro_batch_size × gradient_accumulation ×
// replication.factor samples; replica r at accumulation step s gets samples
// (s R + r) B .. (s R + r) B + B - 1 of it (engine/data/batch_source.h). An epoch has
// floor(n / global batch) steps; the rest of the training set is dropped, with a note.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "engine/engine.h"
#include "reports/run_record.h"
#include "runner/data_order.h"
#include "runner/progress.h"

namespace popkit::runner {

struct TrainOptions {
  // How long: when either is given, exactly these limits (the run stops at the first
  // reached) and the config's training.steps/epochs are ignored; else the config's,
  // and epochs = 1 when it has neither. Steps count optimizer steps of the whole run,
  // so a resumed run stops where an uninterrupted one would.
  std::optional<std::int64_t> steps;
  std::optional<std::int64_t> epochs;
  // Where the run's files go (runner/run_dir.h): the run folder is run_dir, else the
  // run file's folder, else a new runs/<config name>/<stamp>/.
  std::string run_dir;
  std::string run_file;  // "" = <run folder>/run.json
  bool write_run_file = true;
  std::string checkpoint_dir;         // "" = the run folder
  bool force = false;                 // write into a folder that holds an earlier run
  std::int64_t checkpoint_every = 0;  // optimizer steps; 0 = only at the end
  // What to continue from: a checkpoint, a run folder (its newest checkpoint) or
  // "latest" (the newest checkpoint of runs/<config name>/latest). It must be of the same
  // training (runner/config_match.h) and not past the limits (runner/run_length.h).
  std::string resume;
  std::string init_from;  // starting weights; "" = the config's model.init_from
  // The command line that started the run (the tool's name first), for the run folder.
  std::vector<std::string> command;
  int n_threads = 0;                                        // engine threads; 0 = the machine's
  engine::IoOverlap io_overlap = engine::IoOverlap::kAuto;  // who moves io_overlapped's data
  // Polled after every step: true finishes there, writes a checkpoint and returns with
  // `interrupted` set (poprun wires SIGINT/SIGTERM to it).
  std::function<bool()> stop_requested;
  // Also polled during a step until its update begins (engine::EngineOptions::
  // stop_requested): in one process before each op, from the engine's threads; over
  // several where the ranks agree (before each collective and the update), every rank
  // abandoning the step when any rank's is true. True abandons the step (not counted,
  // its data not consumed), then as stop_requested.
  std::function<bool()> stop_within_step;
};

struct TrainResult {
  std::int64_t steps = 0;       // optimizer steps done, the whole run
  std::int64_t first_step = 0;  // the step this process started from (> 0: resumed)
  DataPosition data;            // where the next step would start
  bool interrupted = false;
  // Resumed from a checkpoint at the run's end: what ends it ("--steps 10"); nothing was
  // trained and no run folder made. "" for a run that trained.
  std::string nothing_to_train;
  double last_loss = 0.0;
  std::optional<engine::EvalResult> test;          // at the end (none when interrupted)
  std::vector<std::uint64_t> measured_peak_bytes;  // per replica
  reports::RunRecord record;
  std::string run_dir;       // the run folder
  std::string run_file;      // "" when not written
  std::string metrics_file;  // "" when not written (ranks other than 0)
  std::string checkpoint;    // the last checkpoint written
  double seconds = 0.0;      // wall time of this process's training loop
};

TrainResult train(const config::Config& config, const TrainOptions& options, Progress& progress);

}  // namespace popkit::runner
