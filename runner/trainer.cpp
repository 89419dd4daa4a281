#include "runner/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <span>

#include "base/error.h"
#include "base/units.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/world.h"
#include "planner/build.h"
#include "planner/host_memory.h"
#include "runner/agreement.h"
#include "runner/calibrate.h"
#include "runner/checkpoint.h"
#include "runner/metrics_log.h"
#include "runner/outputs.h"
#include "runner/placement.h"
#include "runner/resolved_config.h"
#include "runner/run_dir.h"

namespace popkit::runner {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Limits {
  std::optional<std::int64_t> steps;
  std::optional<std::int64_t> epochs;
};

Limits limits_of(const config::Config& config, const TrainOptions& options) {
  if (options.steps || options.epochs) return {options.steps, options.epochs};
  Limits l{config.training.steps, config.training.epochs};
  if (!l.steps && !l.epochs) l.epochs = 1;
  return l;
}

// Steps at which the run will stop, counted from `step` at position `data`.
std::int64_t total_steps(const Limits& l, std::int64_t step, DataPosition data,
                         std::int64_t steps_per_epoch, std::int64_t global_batch) {
  std::int64_t total = std::numeric_limits<std::int64_t>::max();
  if (l.epochs) {
    // Saturating: --epochs near 2^63 runs until stopped; it does not wrap around.
    std::int64_t epoch_steps = 0, end = 0;
    const bool overflow =
        __builtin_mul_overflow(*l.epochs - data.epoch, steps_per_epoch, &epoch_steps) ||
        __builtin_add_overflow(
            step, std::max<std::int64_t>(0, epoch_steps - data.position / global_batch), &end);
    if (!overflow) total = end;
  }
  if (l.steps) total = std::min(total, *l.steps);
  return std::max(total, step);
}

engine::EngineOptions engine_options(const config::Config& config, int n_threads,
                                     engine::IoOverlap io_overlap = engine::IoOverlap::kAuto) {
  engine::EngineOptions o;
  o.n_threads = n_threads;
  o.io_overlap = io_overlap;
  o.normalize_mean = config.data.normalize_mean;
  o.normalize_std = config.data.normalize_std;
  return o;
}

// The dataset must fit the model: image shape and classes. Images are rows x cols; an
// input_shape of more dims folds its trailing ones into cols (as the synthetic set is
// made), so [28, 28] takes 28x28 images only, not 1x784 ones with as many pixels.
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

// Evaluation needs a sample to average over: an empty test set would report 0/0.
void check_test_set(const engine::Dataset& test) {
  if (test.n == 0)
    throw Error("{}: 0 test samples: evaluating the model needs at least one", test.name);
}

// Refuses, before anything large is allocated, a run this machine cannot hold: the
// datasets' sizes come from the config or the IDX headers, the rest from the plans
// (training: `plan` and the evaluation plan `eval`; evaluation: `plan` alone).
void check_host_memory(const planner::Plan& plan, const planner::Plan* eval,
                       const config::Config& config) {
  const bool training = plan.program == planner::Program::kTrain;
  planner::DatasetSizes data;
  if (training) data.train = engine::peek_dataset_size(config, engine::Split::kTrain);
  data.test = engine::peek_dataset_size(config, engine::Split::kTest);
  const planner::HostMemory need = planner::estimate_host_memory(
      plan, eval, config, data, training ? planner::HostUse::kTrain : planner::HostUse::kEvaluate);
  if (const std::string why = planner::host_memory_problem(need, planner::available_host_memory());
      !why.empty())
    throw Error("{}; POPKIT_HOST_MEMORY=SIZE overrides what poprun takes as available", why);
}

// Each phase's measured memory (per replica, the largest over the steps) and time (mean
// per step: an optimizer step, or an evaluation batch).
void add_phase_measurements(std::vector<reports::PhaseRecord>& phases, const engine::Timings& t,
                            const engine::MemoryReport& memory) {
  const auto steps = static_cast<double>(std::max<std::int64_t>(1, t.steps));
  for (std::size_t p = 0; p < phases.size(); ++p) {
    auto& phase = phases[p];
    phase.measured.clear();
    if (p < memory.phases.size())
      for (const auto& m : memory.phases[p])
        phase.measured.push_back(reports::memory_from_phase(m));
    if (p < t.phase_seconds.size()) phase.measured_seconds = t.phase_seconds[p] / steps;
  }
  for (std::size_t p = 0; p < phases.size() && p < t.phase_category_seconds.size(); ++p) {
    const auto& c = t.phase_category_seconds[p];
    const auto per_step = [&](engine::OpCategory k) {
      return c[static_cast<std::size_t>(k)] / steps;
    };
    phases[p].measured_by_kind = {
        per_step(engine::OpCategory::kCompute), per_step(engine::OpCategory::kCollective),
        per_step(engine::OpCategory::kRemote), per_step(engine::OpCategory::kHostIo),
        per_step(engine::OpCategory::kPipeline)};
  }
}

// The evaluation engine's measurements; `last` is its last evaluation.
void add_eval_measurements(reports::EvalRecord& record, const engine::Engine& eval,
                           const engine::EvalResult& last, std::int64_t evaluations) {
  add_phase_measurements(record.phases, eval.timings(), eval.memory_report());
  record.n_samples = last.n;
  record.evaluations = evaluations;
  record.batches = last.batches;
  record.seconds = last.seconds;
  record.samples_per_second = last.seconds > 0 ? static_cast<double>(last.n) / last.seconds : 0.0;
}

// Which rank hosted each replica, and the bytes that crossed between ranks per replica
// per step (mean): for a run over several processes only.
std::optional<reports::Processes> processes_of(const engine::Engine& engine,
                                               const std::vector<engine::BytesMoved>& moved,
                                               std::int64_t steps) {
  if (engine.n_ranks() == 1) return std::nullopt;
  reports::Processes p;
  p.ranks = engine.n_ranks();
  p.mpi = engine::process_world().library();
  for (const int k : engine.replica_ranks()) p.replica_ranks.push_back(k);
  std::uint64_t total = 0;
  for (const auto& b : moved) total += b.cross_process_sent + b.cross_process_received;
  p.cross_process_bytes =
      total / (static_cast<std::uint64_t>(std::max<std::size_t>(1, moved.size())) *
               static_cast<std::uint64_t>(std::max<std::int64_t>(1, steps)));
  return p;
}

// The measured half of the run file. Losses and step times are the whole run's: the
// earlier run's (`history`, when resumed) before this process's; so is the throughput.
// Phase times and memory are this process's.
void add_measurements(reports::RunRecord& record, const engine::Engine& engine,
                      const std::vector<double>& losses, const RunHistory& history) {
  const engine::Timings& t = engine.timings();
  const engine::MemoryReport memory = engine.memory_report();
  add_phase_measurements(record.phases, t, memory);
  record.streaming_measured = memory.streaming_bytes;
  record.step_seconds = history.step_seconds;
  record.step_seconds.insert(record.step_seconds.end(), t.step_seconds.begin(),
                             t.step_seconds.end());
  record.loss = history.loss;
  record.loss.insert(record.loss.end(), losses.begin(), losses.end());
  record.first_step = history.first_step;
  const std::int64_t n = static_cast<std::int64_t>(record.step_seconds.size());
  record.throughput = reports::throughput_from_steps(
      record.step_seconds, engine.plan().global_batch_size, std::min<std::int64_t>(10, n / 5));
  const auto moved = engine.bytes_moved();
  reports::BytesMoved mean;
  for (const auto& b : moved) {
    mean.host += b.host_in + b.host_out;
    mean.remote += b.remote_in + b.remote_out;
    mean.collective += b.collective_sent + b.collective_received;
  }
  const auto per = static_cast<std::uint64_t>(std::max<std::size_t>(1, moved.size())) *
                   static_cast<std::uint64_t>(std::max<std::int64_t>(1, t.steps));
  record.bytes_measured = {mean.host / per, mean.remote / per, mean.collective / per};
  record.environment = reports::current_environment(engine.n_threads());
  record.environment.kernels = engine::kernels_in_use();
  record.processes = processes_of(engine, moved, t.steps);
  if (const auto& pp = engine.plan().pipeline; pp && !t.pipeline_bubble.empty()) {
    std::vector<double> b = t.pipeline_bubble;
    std::nth_element(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(b.size() / 2), b.end());
    record.pipeline =
        reports::PipelineRecord{static_cast<std::int64_t>(pp->stages.size()), pp->planned_bubble,
                                pp->estimated_bubble, b[b.size() / 2]};
  }
}

// The figures of the step just done, for metrics.jsonl: its time, and each phase's from
// the engine's running sums (`before`: the sums before the step).
StepMetrics step_metrics(const engine::Engine& engine, const std::vector<std::string>& phase_names,
                         const std::vector<double>& before, std::int64_t step, std::int64_t epoch,
                         double loss, const config::Config& config) {
  const engine::Timings& t = engine.timings();
  StepMetrics m;
  m.step = step;
  m.epoch = epoch;
  m.loss = loss;
  m.step_seconds = t.step_seconds.empty() ? 0.0 : t.step_seconds.back();
  m.samples_per_second = m.step_seconds > 0
                             ? static_cast<double>(engine.plan().global_batch_size) / m.step_seconds
                             : 0.0;
  m.learning_rate = config.training.optimizer.lr;
  for (std::size_t p = 0; p < phase_names.size() && p < t.phase_seconds.size(); ++p)
    // The difference of two running sums, rounded to the clock's nanoseconds: no 1e-21
    // residue of the subtraction in the log.
    m.phase_seconds.emplace_back(
        phase_names[p],
        std::round((t.phase_seconds[p] - (p < before.size() ? before[p] : 0.0)) * 1e9) / 1e9);
  return m;
}

planner::Plan plan_of(const config::Config& config,
                      planner::Program program = planner::Program::kTrain,
                      const planner::Plan* eval = nullptr) {
  planner::Plan plan = planner::build_plan(config, program, eval);
  if (!plan.fits)
    throw Error("the {}plan of '{}' does not fit: phase '{}' needs {} more than the {} per replica",
                program == planner::Program::kEval ? "evaluation " : "", config.name,
                plan.not_fitting.phase, format_bytes(plan.not_fitting.bytes_over),
                format_bytes(plan.memory_per_replica));
  return plan;
}

// Rank 0 decides the run's folders (and creates them: no other rank touches the outputs)
// and what --resume names, before any new folder exists; every rank receives the same.
// A failure there is every rank's, printed once by rank 0 with its exit code.
void decide_outputs(engine::World& world, const config::Config& config, const TrainOptions& options,
                    RunPaths& paths, ResumePoint& resume) {
  const auto decide = [&] {
    ResumePoint r;
    if (!options.resume.empty()) r = resolve_resume(options.resume, config.name);
    const RunFolderRequest request{config.name,
                                   options.run_dir,
                                   options.run_file,
                                   options.write_run_file,
                                   options.checkpoint_dir,
                                   options.force};
    return to_json(make_run_paths(request, std::time(nullptr)), r);
  };
  if (world.size() == 1) {
    from_json(decide(), paths, resume);
    return;
  }
  int code = 0;
  std::string text;
  if (world.rank() == 0) {
    try {
      text = decide().dump();
    } catch (const AgreedError& e) {
      text = e.what();
      code = e.exit_code();
    } catch (const std::exception& e) {
      text = e.what();
      code = 1;
    }
  }
  const std::string mine = static_cast<char>(code) + text;
  const auto parts = world.all_gather(std::as_bytes(std::span(mine.data(), mine.size())));
  POPKIT_ASSERT(!parts.empty() && !parts[0].empty());
  const std::string decided(reinterpret_cast<const char*>(parts[0].data()) + 1,
                            parts[0].size() - 1);
  if (const int failed = static_cast<int>(parts[0][0]); failed != 0)
    throw AgreedError(decided, world.rank() == 0, failed);
  from_json(nlohmann::json::parse(decided), paths, resume);
}

// A stamped run folder that a failed set-up leaves empty is removed (rank 0).
struct EmptyFolderGuard {
  const RunPaths* paths = nullptr;
  ~EmptyFolderGuard() {
    if (paths) remove_if_empty(*paths);
  }
};

}  // namespace

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

// train(): each rank runs its replicas; rank 0 (the writer) alone touches the outputs.
TrainResult train_agreed(const config::Config& config, const TrainOptions& options,
                         Progress& progress, SetupAgreement& agreement) {
  TrainResult result;
  engine::World& world = engine::process_world();
  const bool writer = world.rank() == 0;
  planner::Plan eval_planned = plan_of(config, planner::Program::kEval);
  planner::Plan planned = plan_of(config, planner::Program::kTrain, &eval_planned);
  (void)engine::hosted_replicas(planned.replication_factor, world.rank(), world.size());

  // Outputs first: a path that cannot be written fails before any data is read.
  RunPaths paths;
  ResumePoint resume_point;
  decide_outputs(world, config, options, paths, resume_point);
  EmptyFolderGuard empty_guard{writer ? &paths : nullptr};
  const std::string& run_file = paths.run_file;
  const fs::path& checkpoint_dir = paths.checkpoint_dir;
  const std::string& resume = resume_point.checkpoint;
  if (writer) {
    if (!run_file.empty()) check_run_file_path(run_file);
    ensure_writable_dir(paths.dir, "run");
    ensure_writable_dir(checkpoint_dir, "checkpoint");
  }
  check_host_memory(planned, &eval_planned, config);

  // Checkpoints next: a bad one fails before the data is read.
  const std::string init_from =
      !options.init_from.empty() ? options.init_from : config.model.init_from;
  std::optional<LoadedCheckpoint> resumed, initial;
  if (!resume.empty())
    resumed = read_checkpoint(resume, planned, Restore::kEverything);
  else if (!init_from.empty())
    initial = read_checkpoint(init_from, planned, Restore::kWeights);
  // The checkpoints this run writes: none may be blocked by a folder of the same name.
  if (writer) {
    check_checkpoint_paths(checkpoint_dir, resumed ? resumed->state.step : 0);
    for (const std::string& stale : remove_stale_temporaries(checkpoint_dir, run_file))
      progress.note(
          fmt::format("removed {}, left by an earlier run that did not finish writing it", stale));
  }

  const engine::Dataset train_set = engine::load_dataset(config, engine::Split::kTrain);
  const engine::Dataset test_set = engine::load_dataset(config, engine::Split::kTest);
  check_dataset(train_set, planned);
  check_dataset(test_set, planned);
  check_test_set(test_set);
  const std::int64_t g = planned.global_batch_size;
  const std::int64_t steps_per_epoch = batches_per_epoch(train_set.n, g);
  if (steps_per_epoch == 0)
    throw Error(
        "{}: {} training samples do not fill one global batch of {} (micro_batch_size {} "
        "x gradient_accumulation {} x replication.factor {})",
        train_set.name, train_set.n, g, planned.micro_batch_size, planned.gradient_accumulation,
        planned.replication_factor);
  if (const std::int64_t dropped = train_set.n - steps_per_epoch * g; dropped > 0)
    progress.note(fmt::format(
        "note: each epoch uses {} of the {} training samples: the last {} do not fill a global "
        "batch of {} ({} x {} x {}) and are dropped",
        steps_per_epoch * g, train_set.n, dropped, g, planned.micro_batch_size,
        planned.gradient_accumulation, planned.replication_factor));

  // From here the ranks work together: a failure ends them all (poprun's MPI_Abort).
  agreement.reached();
  empty_guard.paths = nullptr;
  MetricsLog metrics;
  if (writer) {
    if (const std::string why = point_latest(paths); !why.empty())
      progress.note(fmt::format("warning: {}", why));
    metrics = MetricsLog(paths.dir / kMetricsFileName);
  }
  // The engine keeps the plan (it is the program it runs): moved, not copied.
  engine::Engine engine(std::move(planned),
                        engine_options(config, options.n_threads, options.io_overlap));
  const planner::Plan& plan = engine.plan();
  engine.initialize(config.model.init);
  // Evaluation runs its own plan on its own engine, the weights copied over each time.
  engine::Engine eval_engine(std::move(eval_planned),
                             engine_options(config, options.n_threads, options.io_overlap));
  std::int64_t evaluations = 0;
  const auto evaluate = [&] {
    engine::copy_weights(engine, eval_engine);
    ++evaluations;
    return evaluate_test_set(eval_engine, test_set);
  };

  RunHistory history;  // the earlier run's steps, when resumed
  CheckpointState state;
  state.shuffle = config.data.shuffle;
  state.shuffle_seed = config.training.seed;
  state.global_batch_size = g;
  state.n_train = train_set.n;
  state.config_name = config.name;
  state.config_hash = config_hash(config);

  if (resumed) {
    const LoadedCheckpoint& ckpt = *resumed;
    restore_checkpoint(engine, ckpt, resume, Restore::kEverything);
    state.step = ckpt.state.step;
    state.data = ckpt.state.data;
    state.shuffle = ckpt.state.shuffle;
    state.shuffle_seed = ckpt.state.shuffle_seed;
    if (ckpt.state.config_hash != state.config_hash)
      progress.note(
          fmt::format("note: {} was written under a different config (hash {}, this "
                      "one {}); continuing from its state",
                      resume, ckpt.state.config_hash, state.config_hash));
    if (ckpt.state.n_train != train_set.n)
      progress.note(
          fmt::format("note: {} was taken over {} training samples, this dataset has "
                      "{}: the data order differs from the original run's",
                      resume, ckpt.state.n_train, train_set.n));
    resumed.reset();  // its tensors are in the engine now
    // A different global batch may leave less than a batch in the epoch.
    if (state.data.position + g > train_set.n) state.data = {state.data.epoch + 1, 0};
    progress.note(fmt::format("resuming from {} at step {} (epoch {}, sample {} of the epoch)",
                              resume, state.step, state.data.epoch + 1, state.data.position));
    history = earlier_history(resume_point.run_dir, state.step);
    if (!history.note.empty()) progress.note(fmt::format("note: {}", history.note));
  } else if (initial) {
    restore_checkpoint(engine, *initial, init_from, Restore::kWeights);
    initial.reset();
    progress.note(fmt::format("starting from the weights in {}", init_from));
  }

  const Limits limits = limits_of(config, options);
  const std::int64_t first_step = state.step;
  const std::int64_t total = total_steps(limits, state.step, state.data, steps_per_epoch, g);

  reports::RunRecord record = reports::record_from_plan(plan);
  record.config = resolved_config_json(config);
  record.run_dir = paths.dir.string();
  if (!resume.empty())
    record.resumed_from =
        reports::ResumedFrom{resume_point.run_dir, history.run_file, resume, first_step};
  std::vector<std::string> phase_names;
  for (const auto& phase : plan.phases) phase_names.push_back(phase.name);
  std::vector<double> phase_seconds_before;

  const auto checkpoint_path = [&](std::int64_t step) {
    return (checkpoint_dir / fmt::format("checkpoint-step{}.safetensors", step)).string();
  };
  std::int64_t last_checkpoint_step = -1;
  const auto checkpoint = [&] {
    const std::string path = checkpoint_path(state.step);
    save_checkpoint(path, engine, state);
    record.checkpoints.push_back({path, state.step});
    result.checkpoint = path;
    last_checkpoint_step = state.step;
  };

  engine::DatasetBatches batches(train_set, plan.replication_factor, plan.gradient_accumulation,
                                 plan.micro_batch_size);
  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1;
  std::vector<double> losses;
  std::optional<engine::EvalResult> last_eval;
  std::int64_t last_eval_step = -1;
  const std::int64_t n_epochs = limits.epochs.value_or(
      last_epoch(state.data.epoch, state.data.position / g, total - state.step, steps_per_epoch));
  // Where the machine has the CPUs as the steps begin and end (runner/placement.h), for
  // the run file: measured by the rank that writes it only, so ranks sharing a host do
  // not pin their probes to the same two CPUs at once.
  const auto round_trip = [&] { return writer ? core_round_trip_seconds() : 0.0; };
  const double round_trip_start = round_trip();
  // And how much of the last-level cache the host leaves the threads (runner/calibrate.h),
  // when the profile has a probe of its own to compare with: at each end, and between
  // steps 0.5, 1, 2, 4, ... seconds in, so a run of a few seconds is watched closely and
  // a long one pays a probe (tens of milliseconds, outside the steps' times) a doubling.
  // Not over several processes: the other ranks' threads, running or waiting on the next
  // collective, would share the CPUs with the probe, and it would measure them.
  const bool probe = writer && world.size() == 1 && engine.plan().device_cache_probe_seconds > 0;
  reports::CacheProbes cache_probes;
  double next_probe = 0.5;
  const auto cache = [&] {
    if (probe) cache_probes.add(cache_probe_seconds(engine.n_threads()));
  };
  cache();
  const auto t0 = Clock::now();
  while (true) {
    if (limits.steps && state.step >= *limits.steps) break;
    if (limits.epochs && state.data.epoch >= *limits.epochs) break;
    if (order_epoch != state.data.epoch) {
      order = epoch_order(train_set.n, state.shuffle_seed, state.data.epoch, state.shuffle);
      order_epoch = state.data.epoch;
    }
    batches.set_batch(std::span<const std::int64_t>(order).subspan(
        static_cast<std::size_t>(state.data.position), static_cast<std::size_t>(g)));
    if (metrics.open()) phase_seconds_before = engine.timings().phase_seconds;
    const double loss = engine.train_step(batches);
    losses.push_back(loss);
    result.last_loss = loss;
    const std::int64_t epoch = state.data.epoch;
    ++state.step;
    state.data = advance(state.data, train_set.n, g);
    if (metrics.open())
      if (const std::string why = metrics.write(step_metrics(
              engine, phase_names, phase_seconds_before, state.step, epoch + 1, loss, config));
          !why.empty())
        progress.note(fmt::format("warning: {}", why));
    progress.update(
        {epoch + 1, n_epochs, state.step, total, first_step, seconds_since(t0), g, loss});
    if (probe && seconds_since(t0) >= next_probe) {
      cache();
      next_probe *= 2;
    }
    if (state.data.epoch != epoch && config.eval.every > 0 &&
        state.data.epoch % config.eval.every == 0) {
      last_eval = evaluate();
      last_eval_step = state.step;
      progress.note(fmt::format("epoch {}: test accuracy {:.2f}% ({}/{}), loss {:.4f}",
                                state.data.epoch, 100.0 * last_eval->accuracy, last_eval->correct,
                                last_eval->n, last_eval->loss));
    }
    if (options.checkpoint_every > 0 && state.step % options.checkpoint_every == 0) checkpoint();
    // Every rank stops after the same step: mpirun passes SIGINT and SIGTERM to each,
    // but not at the same instant.
    const bool stop = options.stop_requested && options.stop_requested();
    if (world.size() > 1 ? engine::any_rank(world, stop) : stop) {
      result.interrupted = true;
      break;
    }
  }
  result.seconds = seconds_since(t0);
  const double round_trip_end = round_trip();
  cache();
  progress.finish();

  if (last_checkpoint_step != state.step) checkpoint();
  if (!result.interrupted) {
    result.test = last_eval_step == state.step && last_eval ? *last_eval : evaluate();
    record.test = reports::TestResult{result.test->accuracy, result.test->loss, result.test->n};
  }
  if (last_eval || result.test) {
    record.eval = reports::eval_record_from_plan(eval_engine.plan());
    add_eval_measurements(*record.eval, eval_engine, result.test ? *result.test : *last_eval,
                          evaluations);
  }
  add_measurements(record, engine, losses, history);
  record.environment.core_round_trip_start_seconds = round_trip_start;
  record.environment.core_round_trip_end_seconds = round_trip_end;
  record.environment.cache_probes = cache_probes;
  result.measured_peak_bytes = engine.memory_report().peak_bytes;
  if (!run_file.empty() && writer) {
    try {
      reports::write_run_file(record, run_file);
    } catch (const Error& e) {
      throw Error("{} (the checkpoint of step {} is {})", e.what(), state.step, result.checkpoint);
    }
    result.run_file = run_file;
  }
  result.steps = state.step;
  result.first_step = first_step;
  result.run_dir = paths.dir.string();
  result.metrics_file = metrics.path();
  result.data = state.data;
  result.record = std::move(record);
  return result;
}

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
  planner::Plan planned = plan_of(config, planner::Program::kEval);
  (void)engine::hosted_replicas(planned.replication_factor, world.rank(), world.size());
  if (!options.run_file.empty() && writer) {
    check_run_file_path(options.run_file);
    remove_stale_temporaries(std::nullopt, options.run_file);
  }
  check_host_memory(planned, nullptr, config);
  const LoadedCheckpoint ckpt = read_checkpoint(options.checkpoint, planned, Restore::kWeights);
  const engine::Dataset test_set = engine::load_dataset(config, engine::Split::kTest);
  check_dataset(test_set, planned);
  check_test_set(test_set);
  if (!options.force)
    check_checkpoint_config(ckpt, options.checkpoint, config.name, config_hash(config));
  agreement.reached();
  engine::Engine engine(std::move(planned), engine_options(config, options.n_threads));
  const planner::Plan& plan = engine.plan();
  engine.initialize(config.model.init);
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
