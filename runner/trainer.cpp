#include "runner/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "base/error.h"
#include "base/output_file.h"
#include "engine/runtime/world.h"
#include "runner/agreement.h"
#include "runner/calibrate.h"
#include "runner/checkpoint.h"
#include "runner/commands.h"
#include "runner/config_match.h"
#include "runner/evaluate.h"
#include "runner/metrics_log.h"
#include "runner/outputs.h"
#include "runner/placement.h"
#include "runner/resolved_config.h"
#include "runner/run_dir.h"
#include "runner/run_length.h"
#include "runner/run_measurements.h"
#include "runner/run_setup.h"
#include "runner/stop_signal.h"
#include "runner/train_batches.h"

namespace popkit::runner {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What a run decides and reads before its ranks work together: its plans, what it
// continues from, its folders (rank 0 holds them: `folder`; every rank knows `paths`),
// its checkpoints and its data. Until the run's set-up has succeeded, destroying it
// leaves no folder the run created (RunFolder).
struct Prepared {
  planner::Plan eval_planned;
  planner::Plan planned;
  Limits limits;
  ResumePoint resume_point;
  bool at_end = false;      // resumed from a checkpoint at the run's end: nothing to train
  std::string config_note;  // how the resumed checkpoint's config differs, if it does
  std::string init_from;
  std::optional<LoadedCheckpoint> resumed, initial;
  std::optional<RunFolder> folder;
  RunPaths paths;
  engine::Dataset train_set, test_set;
  std::int64_t steps_per_epoch = 0;
};

// Rank 0 decides the run's folders, creates and locks them (no other rank touches the
// outputs); every rank receives their paths.
void decide_outputs(engine::World& world, const config::Config& config, const TrainOptions& options,
                    Prepared& p) {
  p.paths = decided_on_rank_0(world, [&] {
              const RunFolderRequest request{config.name,
                                             options.run_dir,
                                             options.run_file,
                                             options.write_run_file,
                                             options.checkpoint_dir,
                                             options.force,
                                             command_line_text(options.command)};
              p.folder.emplace(make_run_paths(request, std::time(nullptr)));
              return nlohmann::json(p.folder->paths);
            }).get<RunPaths>();
}

// What decides the run, as every rank must have it alike (runner/agreement.h).
std::vector<Setting> run_settings(const TrainOptions& o) {
  const auto number = [](const std::optional<std::int64_t>& v) {
    return v ? std::to_string(*v) : std::string();
  };
  return {{"--steps", number(o.steps)},
          {"--epochs", number(o.epochs)},
          {"--checkpoint-every", o.checkpoint_every > 0 ? std::to_string(o.checkpoint_every) : ""},
          {"--resume", o.resume},
          {"--init-from", o.init_from},
          {"--run-dir", o.run_dir},
          {"-o/--output", o.write_run_file ? o.run_file : "(none)"},
          {"--checkpoint-dir", o.checkpoint_dir},
          {"--force", o.force ? "given" : ""}};
}

// Every collective here (rank 0 deciding, ranks comparing) follows either work that is
// the same on every rank or agreement.sync(), so a rank that failed alone meets the
// others in the agreement, never in the collective.
// `watch` (rank 0's): a stop signal ends the set-up at once, the folder undone.
void prepare(Prepared& p, engine::World& world, const config::Config& config,
             const TrainOptions& options, Progress& progress, SetupAgreement& agreement,
             SetupWatch* watch) {
  const bool writer = world.rank() == 0;
  check_ranks_agree(world, run_settings(options), "the command line");
  p.eval_planned = plan_of(config, planner::Program::kEval);
  p.planned = plan_of(config, planner::Program::kTrain, &p.eval_planned);
  check_ranks_host(p.planned, world);

  // What to continue from, and its checkpoint: a bad one fails before any folder is made.
  if (!options.resume.empty())
    p.resume_point = decided_on_rank_0(world, [&] {
                       return nlohmann::json(resolve_resume(options.resume, config.name));
                     }).get<ResumePoint>();
  const std::string& resume = p.resume_point.checkpoint;
  p.init_from = !options.init_from.empty() ? options.init_from : config.model.init_from;
  p.limits = limits_of(config, options.steps, options.epochs);
  check_host_memory(p.planned, &p.eval_planned, config, world);
  if (!resume.empty())
    p.resumed = read_checkpoint(resume, p.planned, Restore::kEverything);
  else if (!p.init_from.empty())
    p.initial = read_checkpoint(p.init_from, p.planned, Restore::kWeights);
  agreement.sync();
  if (p.resumed) {
    // Every rank continues from the same file (ranks on several hosts read their own).
    const auto& metadata = p.resumed->file.metadata;
    const auto checksum = metadata.find("checksum");
    check_ranks_agree(world,
                      {{"the step of " + resume, std::to_string(p.resumed->state.step)},
                       {"the checksum of " + resume,
                        checksum == metadata.end() ? std::string() : checksum->second}},
                      "the checkpoint resumed");
    p.config_note = check_resume_config(*p.resumed, resume, config);
    p.at_end = resumed_at_end(p.resumed->state, p.limits, resume, config);
    if (p.at_end) return;
  }

  // Outputs next: a path that cannot be written fails before any data is read.
  std::unique_lock<std::mutex> held;
  if (watch) {
    watch->on_stop([&p] {
      if (p.folder) p.folder->abandon();
    });
    held = watch->hold();
  }
  decide_outputs(world, config, options, p);
  const std::string& run_file = p.paths.run_file;
  const fs::path& checkpoint_dir = p.paths.checkpoint_dir;
  if (writer) {
    if (!run_file.empty()) check_run_file_path(run_file);
    ensure_writable_dir(p.paths.dir, "run");
    ensure_writable_dir(checkpoint_dir, "checkpoint");
    // The checkpoints this run writes: none may be blocked by a folder of the same name.
    check_checkpoint_paths(checkpoint_dir, p.resumed ? p.resumed->state.step : 0);
    for (const std::string& stale : remove_stale_temporaries(checkpoint_dir, run_file))
      progress.note(
          fmt::format("removed {}, left by an earlier run that did not finish writing it", stale));
  }
  if (held) held.unlock();

  p.train_set = engine::load_dataset(config, engine::Split::kTrain);
  p.test_set = engine::load_dataset(config, engine::Split::kTest);
  agreement.sync();
  check_ranks_agree(world,
                    {{"the training set's size", std::to_string(p.train_set.n)},
                     {"the test set's size", std::to_string(p.test_set.n)}},
                    "the data");
  const engine::Dataset& train_set = p.train_set;
  check_dataset(train_set, p.planned);
  check_dataset(p.test_set, p.planned);
  check_test_set(p.test_set);
  const planner::Plan& planned = p.planned;
  const std::int64_t g = planned.global_batch_size;
  if (p.resumed)
    check_resumed_position(p.resumed->state, train_set.n, g, config.data.shuffle,
                           config.training.seed, resume);
  p.steps_per_epoch = batches_per_epoch(train_set.n, g);
  if (p.steps_per_epoch == 0)
    throw Error(
        "{}: {} training samples do not fill one global batch of {} (micro_batch_size {} "
        "x gradient_accumulation {} x replication.factor {})",
        train_set.name, train_set.n, g, planned.micro_batch_size, planned.gradient_accumulation,
        planned.replication_factor);
  if (const std::int64_t dropped = train_set.n - p.steps_per_epoch * g; dropped > 0)
    progress.note(fmt::format(
        "note: each epoch uses {} of the {} training samples: the last {} do not fill a global "
        "batch of {} ({} x {} x {}) and are dropped",
        p.steps_per_epoch * g, train_set.n, dropped, g, planned.micro_batch_size,
        planned.gradient_accumulation, planned.replication_factor));
}

// Rank 0, once the engines exist and the run will start: the folders stay, --force's
// earlier run goes, `latest` points at the run, and its config.yaml is written and its
// metrics.jsonl begun.
void open_outputs(Prepared& p, const config::Config& config, const TrainOptions& options,
                  Progress& progress, MetricsLog& metrics) {
  p.folder->keep();
  if (options.force)
    for (const std::string& removed : remove_earlier_run(p.paths, p.resume_point.checkpoint))
      progress.note(fmt::format("removed {}, the earlier run's (--force)", removed));
  if (const std::string why = point_latest(p.paths); !why.empty())
    progress.note(fmt::format("warning: {}", why));
  const std::string run_length = options.steps    ? fmt::format("--steps {}", *options.steps)
                                 : options.epochs ? fmt::format("--epochs {}", *options.epochs)
                                                  : std::string();
  const std::string yaml =
      resolved_config_yaml(config, command_line_text(options.command), run_length);
  AtomicFile file((p.paths.dir / kConfigFileName).string(), TemporaryName::kHiddenPerProcess);
  file.write(yaml.data(), yaml.size());
  file.commit();
  metrics = MetricsLog(p.paths.dir / kMetricsFileName);
}

// The training loop and what it keeps: the run's state (what a checkpoint holds), its
// record (the run file), the losses, and the evaluations of the test set. Rank 0 (the
// writer) alone writes files; every rank takes every step.
class Steps {
 public:
  Steps(const config::Config& config, const TrainOptions& options, Progress& progress,
        engine::World& world, Prepared& p, engine::Engine& engine, engine::Engine& eval_engine,
        MetricsLog& metrics)
      : config_(config),
        options_(options),
        progress_(progress),
        world_(world),
        p_(p),
        engine_(engine),
        eval_engine_(eval_engine),
        metrics_(metrics),
        g_(engine.plan().global_batch_size),
        writer_(world.rank() == 0) {}

  // The state to start from: the checkpoint resumed (weights, optimizer state and where
  // the data stands), or the weights of init_from, or the initialised engine's.
  void restore();
  // The run file's planned half and where the run came from; the limits.
  void begin();
  // The steps, until a limit or a stop request; `result` says whether interrupted.
  void run();
  // The last checkpoint, the final evaluation and the run file.
  TrainResult finish();

 private:
  engine::EvalResult evaluate() {
    engine::copy_weights(engine_, eval_engine_);
    engine::EvalResult e = evaluate_test_set(eval_engine_, p_.test_set);
    ++evaluations_;
    return e;
  }
  void log(const StepMetrics& line) {
    if (metrics_.open())
      if (const std::string why = metrics_.write(line); !why.empty())
        progress_.note(fmt::format("warning: {}", why));
  }
  // A stop request abandoned the evaluation after step state_.step: the step's line is
  // logged without a test result, and finish() checkpoints the step.
  void stopped_evaluation(const StepMetrics& line) {
    progress_.note(
        fmt::format("the evaluation after step {} was stopped; the checkpoint holds step {}",
                    state_.step, state_.step));
    log(line);
    result_.interrupted = true;
  }
  void checkpoint() {
    const std::string path =
        (p_.paths.checkpoint_dir / fmt::format("checkpoint-step{}.safetensors", state_.step))
            .string();
    save_checkpoint(path, engine_, state_);
    record_.checkpoints.push_back({path, state_.step});
    result_.checkpoint = path;
    last_checkpoint_step_ = state_.step;
  }
  // Where the machine has the CPUs as the steps begin and end (runner/placement.h), for
  // the run file: measured by the rank that writes it only, so ranks sharing a host do
  // not pin their probes to the same two CPUs at once.
  double round_trip() const { return writer_ ? core_round_trip_seconds() : 0.0; }
  void cache() {
    if (probe_) cache_probes_.add(cache_probe_seconds(engine_.n_threads()));
  }

  const config::Config& config_;
  const TrainOptions& options_;
  Progress& progress_;
  engine::World& world_;
  Prepared& p_;
  engine::Engine& engine_;
  engine::Engine& eval_engine_;
  MetricsLog& metrics_;
  const std::int64_t g_;
  const bool writer_;

  TrainResult result_;
  RunHistory history_;  // the earlier run's steps, when resumed
  CheckpointState state_;
  reports::RunRecord record_;
  Limits limits_;
  std::int64_t first_step_ = 0;
  std::int64_t total_ = 0;
  std::int64_t evaluations_ = 0;
  std::int64_t last_checkpoint_step_ = -1;
  std::vector<double> losses_;
  std::optional<engine::EvalResult> last_eval_;
  std::int64_t last_eval_step_ = -1;
  bool probe_ = false;
  reports::CacheProbes cache_probes_;
  double round_trip_start_ = 0.0;
  double round_trip_end_ = 0.0;
};

void Steps::restore() {
  const engine::Dataset& train_set = p_.train_set;
  state_.shuffle = config_.data.shuffle;
  state_.shuffle_seed = config_.training.seed;
  state_.global_batch_size = g_;
  state_.n_train = train_set.n;
  state_.config_name = config_.name;
  state_.config_hash = config_hash(config_);
  state_.config = resolved_config_json(config_).dump();
  const std::string& resume = p_.resume_point.checkpoint;
  if (p_.resumed) {
    const LoadedCheckpoint& ckpt = *p_.resumed;
    restore_checkpoint(engine_, ckpt, resume, Restore::kEverything);
    state_.step = ckpt.state.step;
    state_.data = ckpt.state.data;
    if (!p_.config_note.empty()) progress_.note(p_.config_note);
    p_.resumed.reset();  // its tensors are in the engine now
    progress_.note(fmt::format("resuming from {} at step {} (epoch {}, sample {} of the epoch)",
                               resume, state_.step, state_.data.epoch + 1, state_.data.position));
    history_ = earlier_history(p_.resume_point.run_dir, state_.step);
    if (!history_.note.empty()) progress_.note(fmt::format("note: {}", history_.note));
  } else if (p_.initial) {
    restore_checkpoint(engine_, *p_.initial, p_.init_from, Restore::kWeights);
    p_.initial.reset();
    progress_.note(fmt::format("starting from the weights in {}", p_.init_from));
  }
}

void Steps::begin() {
  limits_ = p_.limits;
  first_step_ = state_.step;
  total_ = total_steps(limits_, state_.step, state_.data, p_.steps_per_epoch, g_);
  const std::string& resume = p_.resume_point.checkpoint;
  record_ = reports::record_from_plan(engine_.plan());
  record_.config = resolved_config_json(config_);
  record_.run_dir = p_.paths.dir.string();
  record_.command = options_.command;
  record_.config_hash = state_.config_hash;
  record_.evaluations = history_.evaluations;
  if (!resume.empty())
    record_.resumed_from =
        reports::ResumedFrom{p_.resume_point.run_dir, history_.run_file, resume, first_step_};
}

void Steps::run() {
  const engine::Dataset& train_set = p_.train_set;
  const planner::Plan& plan = engine_.plan();
  std::vector<std::string> phase_names;
  for (const auto& phase : plan.phases) phase_names.push_back(phase.name);
  std::vector<double> phase_seconds_before;
  TrainBatches batches(config_, train_set, plan);
  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1;
  const std::int64_t n_epochs = limits_.epochs.value_or(last_epoch(
      state_.data.epoch, state_.data.position / g_, total_ - state_.step, p_.steps_per_epoch));
  round_trip_start_ = round_trip();
  // And how much of the last-level cache the host leaves the threads (runner/calibrate.h),
  // when the profile has a probe of its own to compare with: at each end, and between
  // steps 0.5, 1, 2, 4, ... seconds in, so a run of a few seconds is watched closely and
  // a long one pays a probe (tens of milliseconds, outside the steps' times) a doubling.
  // Not over several processes: the other ranks' threads, running or waiting on the next
  // collective, would share the CPUs with the probe, and it would measure them.
  probe_ = writer_ && world_.size() == 1 && plan.device_cache_probe_seconds > 0;
  double next_probe = 0.5;
  cache();
  const auto t0 = Clock::now();
  while (true) {
    if (limits_.steps && state_.step >= *limits_.steps) break;
    if (limits_.epochs && state_.data.epoch >= *limits_.epochs) break;
    if (order_epoch != state_.data.epoch) {
      order = epoch_order(train_set.n, state_.shuffle_seed, state_.data.epoch, state_.shuffle);
      order_epoch = state_.data.epoch;
    }
    const engine::BatchSource& batch = batches.at(
        std::span<const std::int64_t>(order).subspan(static_cast<std::size_t>(state_.data.position),
                                                     static_cast<std::size_t>(g_)),
        state_.data.epoch);
    if (metrics_.open()) phase_seconds_before = engine_.timings().phase_seconds;
    double loss = 0.0;
    try {
      loss = engine_.train_step(batch);
    } catch (const engine::StepAbandoned&) {
      // A stop request before the step's update (every rank alike: engine.h): the
      // engine holds step state_.step's variables, and the data has not moved on, so
      // the checkpoint written is of that step and a resume takes this step again.
      progress_.note(fmt::format("step {} stopped before its update; the checkpoint holds step {}",
                                 state_.step + 1, state_.step));
      result_.interrupted = true;
      break;
    }
    losses_.push_back(loss);
    result_.last_loss = loss;
    const std::int64_t epoch = state_.data.epoch;
    ++state_.step;
    state_.data = advance(state_.data, train_set.n, g_);
    StepMetrics line;  // its times now, before an evaluation adds to the engines' sums
    if (metrics_.open())
      line = step_metrics(engine_, phase_names, phase_seconds_before, state_.step, epoch + 1, loss,
                          config_);
    progress_.update(
        {epoch + 1, n_epochs, state_.step, total_, first_step_, seconds_since(t0), g_, loss});
    if (probe_ && seconds_since(t0) >= next_probe) {
      cache();
      next_probe *= 2;
    }
    if (state_.data.epoch != epoch && config_.eval.every > 0 &&
        state_.data.epoch % config_.eval.every == 0) {
      try {
        last_eval_ = evaluate();
      } catch (const engine::EvaluationAbandoned&) {
        // One process: a stop request during the evaluation after a finished step ends
        // the run there, the step's line logged and checkpointed without a test result.
        stopped_evaluation(line);
        break;
      }
      last_eval_step_ = state_.step;
      const engine::EvalResult& e = *last_eval_;
      record_.evaluations.push_back(
          {state_.step, state_.data.epoch, reports::TestResult{e.accuracy, e.loss, e.n}});
      line.test = StepMetrics::Test{e.accuracy, e.loss, e.n};
      progress_.note(fmt::format("epoch {}: test accuracy {:.2f}% ({}/{}), loss {:.4f}",
                                 state_.data.epoch, 100.0 * e.accuracy, e.correct, e.rows, e.loss));
    }
    log(line);
    if (options_.checkpoint_every > 0 && state_.step % options_.checkpoint_every == 0) checkpoint();
    // A step the engine did not abandon: every rank stops after the same step (mpirun
    // passes SIGINT and SIGTERM to each, but not at the same instant).
    const bool stop = options_.stop_requested && options_.stop_requested();
    if (world_.size() > 1 ? engine::any_rank(world_, stop) : stop) {
      result_.interrupted = true;
      break;
    }
  }
  result_.seconds = seconds_since(t0);
  // A stopped run skips the closing probes: under load the round trip alone may retry
  // for a second (runner/placement.h), and a signal must end the run within one.
  if (!result_.interrupted) {
    round_trip_end_ = round_trip();
    cache();
  }
  progress_.finish();
}

TrainResult Steps::finish() {
  if (last_checkpoint_step_ != state_.step) checkpoint();
  if (!result_.interrupted) {
    try {
      result_.test = last_eval_step_ == state_.step && last_eval_ ? *last_eval_ : evaluate();
      record_.test =
          reports::TestResult{result_.test->accuracy, result_.test->loss, result_.test->n};
    } catch (const engine::EvaluationAbandoned&) {
      progress_.note(fmt::format("the final evaluation was stopped; the checkpoint holds step {}",
                                 state_.step));
      result_.interrupted = true;
    }
  }
  if (last_eval_ || result_.test) {
    record_.eval = reports::eval_record_from_plan(eval_engine_.plan());
    add_eval_measurements(*record_.eval, eval_engine_, result_.test ? *result_.test : *last_eval_,
                          evaluations_);
  }
  add_measurements(record_, engine_, losses_, history_);
  record_.environment.core_round_trip_start_seconds = round_trip_start_;
  record_.environment.core_round_trip_end_seconds = round_trip_end_;
  record_.environment.cache_probes = cache_probes_;
  result_.measured_peak_bytes = engine_.memory_report().peak_bytes;
  const std::string& run_file = p_.paths.run_file;
  if (!run_file.empty() && writer_) {
    try {
      reports::write_run_file(record_, run_file);
    } catch (const Error& e) {
      throw Error("{} (the checkpoint of step {} is {})", e.what(), state_.step,
                  result_.checkpoint);
    }
    result_.run_file = run_file;
  }
  result_.steps = state_.step;
  result_.first_step = first_step_;
  result_.run_dir = p_.paths.dir.string();
  result_.metrics_file = metrics_.path();
  result_.data = state_.data;
  result_.record = std::move(record_);
  return std::move(result_);
}

// A run resumed from a checkpoint at its end: nothing trained, no folder made.
TrainResult at_end_result(const config::Config& config, const Prepared& p) {
  TrainResult result;
  const CheckpointState& s = p.resumed->state;
  result.nothing_to_train = describe(p.limits, config);
  result.steps = s.step;
  result.first_step = s.step;
  result.data = s.data;
  result.checkpoint = p.resume_point.checkpoint;
  result.record.name = config.name;
  return result;
}

TrainResult train_agreed(const config::Config& config, const TrainOptions& options,
                         Progress& progress, SetupAgreement& agreement);

}  // namespace

TrainResult train(const config::Config& config, const TrainOptions& options, Progress& progress) {
  SetupAgreement agreement(engine::process_world());
  try {
    return train_agreed(config, options, progress, agreement);
  } catch (...) {
    agreement.fail();
  }
}

namespace {

// How long a stop may take before it is said: $POPKIT_STOP_NOTICE_SECONDS (a number >= 0),
// else 1 s.
std::chrono::milliseconds stop_notice_delay() {
  const char* given = std::getenv("POPKIT_STOP_NOTICE_SECONDS");
  if (given != nullptr && *given != '\0') {
    char* end = nullptr;
    const double seconds = std::strtod(given, &end);
    if (*end == '\0' && seconds >= 0 && seconds < 1e6)
      return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  }
  return std::chrono::seconds(1);
}

// train(): each rank runs its replicas; rank 0 (the writer) alone touches the outputs.
TrainResult train_agreed(const config::Config& config, const TrainOptions& options,
                         Progress& progress, SetupAgreement& agreement) {
  engine::World& world = engine::process_world();
  const bool writer = world.rank() == 0;
  Prepared p;
  // A stop signal ends the set-up at once: rank 0 (the writer) watches it, removes the
  // folder it made and exits 130. Over several processes every rank receives the signal
  // (mpirun passes SIGUSR1 on; a scheduler signals them all), and mpirun ends the others
  // when rank 0 exits; they watch nothing, so that none can exit first and have mpirun
  // kill rank 0 halfway through its undo. A signal that reaches only another rank waits
  // for the steps, which stop together (Steps::run).
  std::optional<SetupWatch> watch;
  if (writer) watch.emplace("poprun", kExitInterrupted);
  prepare(p, world, config, options, progress, agreement, watch ? &*watch : nullptr);
  if (p.at_end) {
    agreement.reached();
    return at_end_result(config, p);
  }

  // From here the ranks work together: a failure ends them all (poprun's MPI_Abort).
  agreement.reached();
  // The engine keeps the plan (it is the program it runs): moved, not copied.
  engine::EngineOptions train_options =
      engine_options(config, options.n_threads, options.io_overlap);
  // A stop request abandons the step in progress until its update begins (engine.h; over
  // several processes where the ranks agree, before a collective or the update), and in
  // one process an evaluation at any point; ranks evaluate to the end.
  train_options.stop_requested = options.stop_within_step;
  engine::EngineOptions eval_options =
      engine_options(config, options.n_threads, options.io_overlap);
  eval_options.stop_requested = train_options.stop_requested;
  engine::Engine engine(std::move(p.planned), std::move(train_options));
  engine.initialize();
  // Evaluation runs its own plan on its own engine, the weights copied over each time.
  engine::Engine eval_engine(std::move(p.eval_planned), std::move(eval_options));

  MetricsLog metrics;
  Steps steps(config, options, progress, world, p, engine, eval_engine, metrics);
  steps.restore();
  // Rank 0 keeps watching until every rank has finished its set-up, so a signal during
  // the slowest one's still ends the run at once; only then are its folder kept and
  // `latest` moved (open_outputs).
  if (world.size() > 1) (void)engine::any_rank(world, false);
  if (watch) watch->finish();
  if (writer) open_outputs(p, config, options, progress, metrics);
  // Rank 0 says a stop that the steps have not ended within the delay (stop_signal.h).
  std::optional<StopNotice> notice;
  if (writer) notice.emplace("poprun", stop_notice_delay());
  steps.begin();
  steps.run();
  return steps.finish();
}

}  // namespace

}  // namespace popkit::runner
