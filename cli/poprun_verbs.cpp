// poprun train, eval, generate and calibrate: argument parsing only; popkit::runner does the work.
// Exit codes: 0 success, 1 failure at run time, 2 invalid input, 130 stopped by
// SIGINT/SIGTERM (after writing a checkpoint).
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "cli/launch.h"
#include "cli/verbs.h"
#include "runner/calibrate.h"
#include "runner/commands.h"
#include "runner/generate.h"
#include "runner/stop_signal.h"

namespace popkit::cli {
namespace {

void add_set_option(CLI::App* app, std::vector<std::string>& overrides) {
  app->add_option("--set", overrides,
                  "Override a config key, typed as YAML: --set training.epochs=2 (repeatable)")
      ->allow_extra_args(false);
}

// --processes N [--hostfile FILE]: the verb runs as N MPI ranks (cli/launch.h).
void add_launch_options(CLI::App* app, Launch& launch) {
  CLI::Option* processes =
      app->add_option("--processes", launch.processes,
                      "run as N MPI ranks under mpirun, each hosting replication.factor/N "
                      "replicas; SIGINT/SIGTERM still stop the step with a checkpoint "
                      "(exit 130)")
          ->check(positive());
  app->add_option("--hostfile", launch.hostfile,
                  "with --processes: mpirun's hostfile, to spread the ranks over hosts "
                  "(docs/multi-host.md)")
      ->needs(processes);
}

// Runs `here` in this process, or the whole command as ranks under mpirun.
int here_or_ranks(const Tool& tool, const Launch& launch, const std::function<int()>& here) {
  bool ranks = false;
  try {
    ranks = wants_ranks(launch);
  } catch (const Error& e) {
    std::cerr << tool.where() << ": error: " << e.what() << '\n';
    return kExitInvalid;
  }
  return ranks ? run_ranks(mpirun_command(launch, tool.arguments()),
                           launch.hostfile.empty() ? launch.processes : 0, tool.where())
               : here();
}

void add_train_verb(Tool& tool, const std::shared_ptr<Launch>& launch) {
  auto train = std::make_shared<runner::TrainCommand>();
  auto steps = std::make_shared<std::int64_t>(0);
  auto epochs = std::make_shared<std::int64_t>(0);
  CLI::App* t = tool.add(
      "train",
      "Train the model of CONFIG on its dataset: progress on stderr, a summary with test "
      "accuracy, a run file and checkpoints. A run needing more host memory than the "
      "machine has available (or $POPKIT_HOST_MEMORY, e.g. 64GiB) is refused. Exit 0 "
      "done, 1 run-time failure, 2 invalid config or refused input, 130 stopped by "
      "SIGINT/SIGTERM (a checkpoint written, or in set-up with nothing written).",
      [train, steps, epochs, launch, &tool] {
        return here_or_ranks(tool, *launch, [&] {
          train->quiet = tool.quiet();
          if (started_by_launcher()) runner::StopSignals::launched_by_poprun(launcher_here());
          train->options.command = {tool.name()};
          const std::vector<std::string> given = launch_arguments(tool.arguments());
          train->options.command.insert(train->options.command.end(), given.begin(), given.end());
          if (*steps > 0) train->options.steps = *steps;
          if (*epochs > 0) train->options.epochs = *epochs;
          return runner::run_train_command(*train, std::cout, std::cerr);
        });
      });
  t->add_option("CONFIG", train->config, "the config file (YAML), or a run folder")->required();
  add_set_option(t, train->overrides);
  t->add_option("--steps", *steps,
                "stop after N optimizer steps of the whole run (a resumed run counts the "
                "steps before it); replaces the config's training.steps and epochs")
      ->check(positive());
  t->add_option("--epochs", *epochs,
                "train N epochs; replaces the config's training.epochs and steps")
      ->check(positive());
  t->add_option("--run-dir", train->options.run_dir,
                "the run's folder (run.json, metrics.jsonl, checkpoints); default a new "
                "runs/<config name>/<UTC stamp>/, with runs/<config name>/latest pointing at it");
  add_output_option(t, train->options.run_file,
                    "the run file (JSON); default RUN_DIR/run.json. Without --run-dir, the "
                    "run folder is this file's folder (checkpoints and metrics.jsonl beside it)",
                    "", OutputFolder::kCreated);
  t->add_flag("--force", train->options.force,
              "write into a run folder that holds an earlier run: its run file, metrics.jsonl, "
              "config.yaml and checkpoints are removed once this run has started; refused "
              "without it (exit 2). A folder another run is writing is refused even so");
  t->add_option("--format", train->format, "the summary as text or json")
      ->check(CLI::IsMember({"text", "json"}));
  t->add_option("--checkpoint-dir", train->options.checkpoint_dir,
                "where checkpoints go; default the run folder");
  t->add_option("--checkpoint-every", train->options.checkpoint_every,
                "also write a checkpoint every N optimizer steps")
      ->check(non_negative());
  t->add_option("--resume", train->options.resume,
                "continue from a checkpoint file, a run folder (its newest checkpoint) or "
                "'latest' (the newest checkpoint of runs/<config name>/latest), in a new run "
                "folder whose run file starts with the earlier run's losses and step times; "
                "the run ends bitwise identical to an uninterrupted one. Refused (exit 2) when "
                "the checkpoint's config trains otherwise (the keys are named) or is past "
                "--steps/--epochs; at the run's end, nothing is trained");
  t->add_option("--init-from", train->options.init_from,
                "start from the weights in a safetensors file (overrides model.init_from)");
  t->add_option("--threads", train->options.n_threads,
                "engine threads; default the machine's, at most one per replica")
      ->check(non_negative());
  t->add_option("--io-thread", train->io_thread,
                "io_overlapped: move the next step's data on an IO thread (on), on each "
                "replica's thread after its step (off), or on an IO thread only when a core is "
                "free (auto)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->default_str("auto");
  t->add_flag("--verbose", train->verbose,
              "under mpirun: every rank prints its progress and summary, not rank 0 alone");
  add_launch_options(t, *launch);
}

void add_eval_verb(Tool& tool, const std::shared_ptr<Launch>& launch) {
  auto eval = std::make_shared<runner::EvalCommand>();
  CLI::App* e = tool.add(
      "eval",
      "Evaluate the weights of a checkpoint on CONFIG's test set: loss and accuracy. Exit 0, "
      "1 run-time failure, 2 invalid config or refused input (a checkpoint that is missing, "
      "damaged or of another model).",
      [eval, launch, &tool] {
        return here_or_ranks(tool, *launch,
                             [&] { return runner::run_eval_command(*eval, std::cout, std::cerr); });
      });
  e->add_option("CONFIG", eval->config,
                "the config file (YAML), or a run folder: its config.yaml, and its newest "
                "checkpoint unless --checkpoint names one")
      ->required();
  e->add_option("--checkpoint", eval->options.checkpoint,
                "the checkpoint (safetensors), or a run folder: its newest checkpoint");
  add_output_option(e, eval->options.run_file, "also write the result to this run file", "",
                    OutputFolder::kCreated);
  e->add_option("--format", eval->format, "the result as text or json")
      ->check(CLI::IsMember({"text", "json"}));
  e->add_flag("--force", eval->options.force,
              "evaluate a checkpoint that another config trained (refused without it: the "
              "checkpoint records its config's hash)");
  e->add_option("--threads", eval->options.n_threads, "engine threads")->check(non_negative());
  add_set_option(e, eval->overrides);
  e->add_flag("--verbose", eval->verbose, "under mpirun: every rank prints its result");
  add_launch_options(e, *launch);
}

void add_generate_verb(Tool& tool) {
  auto generate = std::make_shared<runner::GenerateCommand>();
  CLI::App* g = tool.add(
      "generate",
      "Continue a prompt with text sampled from a language model's checkpoint (a text "
      "config's): byte after byte from the logits at the last position, greedy at "
      "temperature 0. Prints the prompt and the continuation, bytes that are not printable "
      "as \\xHH. Exit 0, 1 run-time failure, 2 invalid input (no checkpoint or config "
      "beside it, a config that does not read text, an empty prompt).",
      [generate] { return runner::run_generate_command(*generate, std::cout, std::cerr); });
  g->add_option("CHECKPOINT", generate->checkpoint,
                "the checkpoint (safetensors) in its run folder, whose config.yaml gives "
                "the model; or a run folder: its newest checkpoint")
      ->required();
  g->add_option("--prompt", generate->prompt,
                "the text to continue (its last `positions` bytes are the context)")
      ->required();
  g->add_option("--tokens", generate->tokens, "how many bytes to generate")
      ->required()
      ->check(positive());
  g->add_option("--temperature", generate->sampling.temperature,
                "sample from softmax(logits / T); 0 takes the largest logit (greedy)")
      ->check(non_negative(Number::kReal))
      ->default_str("1");
  g->add_option("--seed", generate->sampling.seed,
                "the sampling generator's seed: the same seed gives the same text")
      ->default_str("0");
  add_output_option(g, generate->output,
                    "also write the prompt and continuation to this file, as raw bytes");
  g->add_option("--threads", generate->n_threads, "engine threads")->check(non_negative());
}

void add_calibrate_verb(Tool& tool) {
  auto calibrate = std::make_shared<runner::CalibrateCommand>();
  CLI::App* c = tool.add(
      "calibrate",
      "Measure this machine with the engine's own kernels, copies and collectives (a few "
      "seconds) and write a device profile for the cost model: GEMM rates at the MNIST "
      "plans' shapes with a fitted efficiency curve, copy bandwidth, collective latency "
      "and bandwidth, element-wise rate, threads. Plan with it by giving FILE as the "
      "config's device.profile. Exit 0, 1 run-time failure, 2 invalid arguments (e.g. an "
      "output path in a folder that does not exist).",
      [calibrate] { return runner::run_calibrate_command(*calibrate, std::cout, std::cerr); });
  add_output_option(c, calibrate->output, "the profile file to write (YAML; required)", "--write");
  c->add_option("--threads", calibrate->options.n_threads,
                "the threads replicas will run on (poprun train --threads); default the "
                "machine's cores")
      ->check(non_negative());
  c->add_option("--name", calibrate->options.name,
                "the profile's name in plans and reports (default cpu-calibrated)");
  c->add_option("--passes", calibrate->options.passes,
                "every figure the median of N passes, each measuring every figure once "
                "(default 5); fewer are quicker, and a burst of other work on the machine "
                "moves them more")
      ->check(positive());
}

}  // namespace

void add_run_verbs(Tool& tool) {
  // Under mpirun, train and eval take the same launch options (one parse of them).
  auto launch = std::make_shared<Launch>();
  add_train_verb(tool, launch);
  add_eval_verb(tool, launch);
  add_generate_verb(tool);
  add_calibrate_verb(tool);
}

}  // namespace popkit::cli
