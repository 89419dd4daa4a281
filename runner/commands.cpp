#include "runner/commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>
#include <utility>

#include "base/input_file.h"
#include "base/units.h"
#include "config/yaml/load.h"
#include "reports/json_reader.h"
#include "runner/agreement.h"
#include "runner/config_match.h"
#include "runner/resolved_config.h"
#include "runner/run_dir.h"
#include "runner/stop_signal.h"

namespace popkit::runner {
namespace {

namespace fs = std::filesystem;

constexpr int kExitOk = 0;
constexpr int kExitInvalid = 2;

// Under mpirun, rank 0 speaks for the run; the other ranks print nothing but their own
// errors unless --verbose.
struct RankStreams {
  std::ostringstream captured;  // a quiet rank's config diagnostics
  std::ostream none{nullptr};   // discards everything
  bool speaks = true;
  std::ostream& out(std::ostream& real) { return speaks ? real : none; }
  std::ostream& diagnostics(std::ostream& real) { return speaks ? real : captured; }
};

// Input refused before the ranks work together (exit 2). Thrown inside
// on_every_rank(), which makes one rank's refusal every rank's.
template <typename... Args>
[[noreturn]] void refuse(fmt::format_string<Args...> format, Args&&... args) {
  throw InputRefused(fmt::format(format, std::forward<Args>(args)...));
}

// `check()` (files each rank looks at for itself: on several hosts a path may be missing
// on one alone) on every rank, then the ranks agree: when any rank fails, every rank
// exits with its code (2 for a refusal) and the lowest failing rank says why, so that
// no rank waits for one that left. In one process, check()'s own error.
template <typename Check>
auto on_every_rank(Check&& check) -> decltype(check()) {
  SetupAgreement agreement(engine::process_world());
  try {
    auto result = check();
    agreement.reached();
    return result;
  } catch (...) {
    agreement.fail();
  }
}

// A file the user named that is not there is refused input (exit 2), the tool's error as
// gcc's "gcc: error: x.c: No such file" is: "poprun train: error: x.yaml: no such file".
// What is wrong inside a config is said as file:line:column: error: by the loader.
void refuse_missing(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) refuse("{}: no such file", path);
}

// The config on every rank; when it is invalid on any, the lowest such rank's
// diagnostics are printed once and every rank returns false.
std::optional<config::Config> load_config_on_every_rank(const std::string& path,
                                                        const std::vector<std::string>& overrides,
                                                        RankStreams& streams, std::ostream& err) {
  on_every_rank([&] {
    const std::string file = config::config_file_of(path);
    if (std::string why = input_file_problem(file); !why.empty()) refuse("{}: {}", path, why);
    if (std::string why = config::config_name_problem(file); !why.empty())
      refuse("{}: {}", file, why);
    return true;
  });
  auto config = config::load_config_reporting(path, overrides, streams.diagnostics(err));
  engine::World& world = engine::process_world();
  if (world.size() == 1) return config;
  SetupAgreement agreement(world);
  const std::string failure =
      config ? std::string()
             : (streams.speaks ? std::string("invalid config") : streams.captured.str());
  agreement.agree(failure, streams.speaks, kExitInvalid);
  // Every rank must run the same program: the same config file and --set values (a
  // rank's own environment, such as POPKIT_DATA_DIR, may differ).
  const std::string mine = resolved_config_json(*config).dump();
  const auto all = world.all_gather(std::as_bytes(std::span(mine.data(), mine.size())));
  const auto text_of = [&](std::size_t k) {
    return std::string(reinterpret_cast<const char*>(all[k].data()), all[k].size());
  };
  std::string differing;
  for (std::size_t k = 1; k < all.size() && differing.empty(); ++k) {
    if (all[k] == all[0]) continue;
    std::vector<std::string> keys;
    for (const ConfigDifference& d :
         config_differences(nlohmann::json::parse(text_of(0)), nlohmann::json::parse(text_of(k))))
      if (!d.derived)
        keys.push_back(
            fmt::format("{} ({} on rank 0, {} on rank {})", d.key, d.checkpoint_value, d.value, k));
    differing = fmt::format(
        "the config of rank {} differs from rank 0's{}: every rank must run the same config "
        "with the same --set values",
        k, keys.empty() ? std::string() : fmt::format(" in {}", fmt::join(keys, ", ")));
  }
  if (!differing.empty()) throw AgreedError(differing, world.rank() == 0, kExitInvalid);
  return config;
}

// `poprun eval RUN_DIR` (or RUN_DIR/run.json) and `--checkpoint RUN_DIR`: a run folder
// stands for its config.yaml and its newest checkpoint (else the last its run file lists).
EvalCommand with_run_folder(EvalCommand command) {
  std::error_code ec;
  std::string folder = config::run_folder_of(command.config);
  if (!folder.empty() || fs::is_directory(command.config, ec)) {
    if (folder.empty()) folder = command.config;
    command.config = (fs::path(folder) / kConfigFileName).string();
    if (!fs::exists(command.config, ec))
      refuse(
          "{}: a run folder without {} (a run of an older poprun, or not a run folder): give "
          "the config file, and the checkpoint with --checkpoint",
          folder, kConfigFileName);
    if (command.options.checkpoint.empty()) command.options.checkpoint = folder;
  } else if (const std::string why = input_file_problem(command.config); !why.empty()) {
    refuse("{}: {}", command.config, why);
  }
  std::string& checkpoint = command.options.checkpoint;
  if (checkpoint.empty())
    refuse(
        "no checkpoint to evaluate: give --checkpoint CHECKPOINT, or a run folder instead of "
        "{}",
        command.config);
  refuse_missing(checkpoint);
  if (fs::is_directory(checkpoint, ec)) {
    if (const auto newest = newest_checkpoint(checkpoint)) {
      checkpoint = newest->string();
    } else {
      const std::string run_file = (fs::path(checkpoint) / kRunFileName).string();
      std::optional<reports::RunRecord> run;
      if (fs::exists(run_file, ec))
        run = reports::run_record_from_text(reports::read_input_file(run_file), run_file);
      if (!run || run->checkpoints.empty())
        refuse(
            "{} holds no checkpoint (checkpoint-step<N>.safetensors), and no run file "
            "listing one: give the checkpoint's path",
            checkpoint);
      checkpoint = run->checkpoints.back().path;
    }
  }
  return command;
}

}  // namespace

void print_train_summary(std::ostream& out, const TrainResult& r) {
  const auto& rec = r.record;
  if (!r.nothing_to_train.empty()) {
    out << fmt::format(
        "nothing to train: {} is at step {}, the end of this run ({}); no run folder was made. "
        "Give more steps or epochs to train on\n",
        r.checkpoint, r.steps, r.nothing_to_train);
    return;
  }
  // A resumed run: this process's steps over this process's time, the run's total apart.
  const char* status = r.interrupted ? "interrupted" : "trained";
  if (r.first_step > 0)
    out << fmt::format(
        "{} {}: {} steps in {:.1f} s (this process, resumed at step {}); {} steps "
        "in total\n",
        status, rec.name, r.steps - r.first_step, r.seconds, r.first_step, r.steps);
  else
    out << fmt::format("{} {}: {} steps in {:.1f} s\n", status, rec.name, r.steps, r.seconds);
  out << fmt::format("  final loss            {:.4f}\n", r.last_loss);
  if (r.test)
    out << fmt::format("  test accuracy         {:.2f}% ({}/{}), loss {:.4f}\n",
                       100.0 * r.test->accuracy, r.test->correct, r.test->rows, r.test->loss);
  out << fmt::format("  throughput            {} samples/s (median; min {}, max {})\n",
                     format_thousands(rec.throughput.median), format_thousands(rec.throughput.min),
                     format_thousands(rec.throughput.max));
  const std::uint64_t measured =
      r.measured_peak_bytes.empty()
          ? 0
          : *std::max_element(r.measured_peak_bytes.begin(), r.measured_peak_bytes.end());
  out << fmt::format("  peak memory/replica   planned {}, measured {}\n",
                     format_bytes(rec.plan.peak_bytes), format_bytes(measured));
  if (rec.pipeline)
    out << fmt::format(
        "  pipeline bubble       {:.1f}% measured (median), {:.1f}% planned, {:.1f}% estimated "
        "({} stages)\n",
        100 * rec.pipeline->measured_bubble, 100 * rec.pipeline->planned_bubble,
        100 * rec.pipeline->estimated_bubble, rec.pipeline->stages);
  if (!r.run_file.empty()) out << fmt::format("  run file              {}\n", r.run_file);
  if (!r.metrics_file.empty()) out << fmt::format("  metrics               {}\n", r.metrics_file);
  if (!r.checkpoint.empty()) out << fmt::format("  checkpoint            {}\n", r.checkpoint);
}

nlohmann::json train_summary_json(const TrainResult& r) {
  const auto& rec = r.record;
  const std::uint64_t measured =
      r.measured_peak_bytes.empty()
          ? 0
          : *std::max_element(r.measured_peak_bytes.begin(), r.measured_peak_bytes.end());
  nlohmann::json j = {
      {"name", rec.name},
      {"interrupted", r.interrupted},
      {"nothing_to_train", !r.nothing_to_train.empty()},
      {"steps", r.steps},
      {"steps_this_process", r.steps - r.first_step},
      {"resumed_at_step", r.first_step},
      {"seconds", r.seconds},
      {"final_loss", r.last_loss},
      {"throughput",
       {{"median", rec.throughput.median},
        {"min", rec.throughput.min},
        {"max", rec.throughput.max}}},
      {"peak_bytes_per_replica", {{"planned", rec.plan.peak_bytes}, {"measured", measured}}},
      {"run_dir", r.run_dir},
      {"run_file", r.run_file},
      {"metrics_file", r.metrics_file},
      {"checkpoint", r.checkpoint}};
  if (r.test)
    j["test"] = {{"accuracy", r.test->accuracy},
                 {"correct", r.test->correct},
                 {"n", r.test->n},
                 {"loss", r.test->loss}};
  return j;
}

int run_train_command(const TrainCommand& command, std::ostream& out_stream,
                      std::ostream& err_stream) {
  RankStreams streams;
  streams.speaks = engine::process_world().rank() == 0 || command.verbose;
  std::ostream& out = streams.out(out_stream);
  std::ostream& err = streams.out(err_stream);
  StopSignals signals;  // from the start: a signal during the set-up ends it (trainer.h)
  const auto config =
      load_config_on_every_rank(command.config, command.overrides, streams, err_stream);
  if (!config) return kExitInvalid;
  if (!command.options.resume.empty() && command.options.resume != kLatestName)
    on_every_rank([&] {
      refuse_missing(command.options.resume);
      return true;
    });
  TrainOptions options = command.options;
  options.io_overlap = command.io_thread == "on"    ? engine::IoOverlap::kThread
                       : command.io_thread == "off" ? engine::IoOverlap::kInline
                                                    : engine::IoOverlap::kAuto;
  const auto caller_stop = options.stop_requested;
  options.stop_requested = [caller_stop] {
    const bool caller = caller_stop && caller_stop();
    return caller || StopSignals::received() != 0;
  };
  options.stop_within_step = [] { return StopSignals::received() != 0; };
  Progress progress(err, progress_style_for_stderr(command.quiet));
  const TrainResult result = train(*config, options, progress);
  progress.finish();
  if (command.format == "json")
    out << train_summary_json(result).dump(1) << '\n';
  else
    print_train_summary(out, result);
  if (result.interrupted) {
    err << fmt::format(
        "poprun: {} at step {}: checkpoint written to {}; continue with --resume {}\n",
        StopSignals::received() == 0 ? std::string("stopped")
                                     : std::string("stopped by ") + StopSignals::stopped_by(),
        result.steps, result.checkpoint, result.checkpoint);
    return kExitInterrupted;
  }
  return kExitOk;
}

int run_eval_command(const EvalCommand& given, std::ostream& out_stream, std::ostream& err_stream) {
  const EvalCommand command = on_every_rank([&] { return with_run_folder(given); });
  RankStreams streams;
  streams.speaks = engine::process_world().rank() == 0 || command.verbose;
  std::ostream& out = streams.out(out_stream);
  const auto config =
      load_config_on_every_rank(command.config, command.overrides, streams, err_stream);
  if (!config) return kExitInvalid;
  const EvalOutcome outcome = evaluate_checkpoint(*config, command.options);
  if (command.format == "json") {
    const nlohmann::json j = {{"checkpoint", command.options.checkpoint},
                              {"n", outcome.test.n},
                              {"loss", outcome.test.loss},
                              {"accuracy", outcome.test.accuracy},
                              {"correct", outcome.test.correct},
                              {"run_file", command.options.run_file}};
    out << j.dump(1) << '\n';
    return kExitOk;
  }
  out << fmt::format("{} on the {} test samples: loss {:.4f}, accuracy {:.2f}% ({}/{})\n",
                     command.options.checkpoint, outcome.test.n, outcome.test.loss,
                     100.0 * outcome.test.accuracy, outcome.test.correct, outcome.test.rows);
  if (!command.options.run_file.empty())
    out << fmt::format("run file: {}\n", command.options.run_file);
  return kExitOk;
}

}  // namespace popkit::runner
