#include "runner/commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>

#include "base/units.h"
#include "config/yaml/load.h"
#include "runner/stop_signal.h"

namespace popkit::runner {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitInvalid = 2;

}  // namespace

void print_train_summary(std::ostream& out, const TrainResult& r) {
  const auto& rec = r.record;
  out << fmt::format("{} {}: {} steps in {:.1f} s\n", r.interrupted ? "interrupted" : "trained",
                     rec.name, r.steps, r.seconds);
  out << fmt::format("  final loss            {:.4f}\n", r.last_loss);
  if (r.test)
    out << fmt::format("  test accuracy         {:.2f}% ({}/{}), loss {:.4f}\n",
                       100.0 * r.test->accuracy, r.test->correct, r.test->n, r.test->loss);
  out << fmt::format("  throughput            {} samples/s (median; min {}, max {})\n",
                     format_thousands(rec.throughput.median), format_thousands(rec.throughput.min),
                     format_thousands(rec.throughput.max));
  const std::uint64_t measured =
      r.measured_peak_bytes.empty()
          ? 0
          : *std::max_element(r.measured_peak_bytes.begin(), r.measured_peak_bytes.end());
  out << fmt::format("  peak memory/replica   planned {}, measured {}\n",
                     format_bytes(rec.plan.peak_bytes), format_bytes(measured));
  if (!r.run_file.empty()) out << fmt::format("  run file              {}\n", r.run_file);
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
      {"steps", r.steps},
      {"seconds", r.seconds},
      {"final_loss", r.last_loss},
      {"throughput",
       {{"median", rec.throughput.median},
        {"min", rec.throughput.min},
        {"max", rec.throughput.max}}},
      {"peak_bytes_per_replica", {{"planned", rec.plan.peak_bytes}, {"measured", measured}}},
      {"run_file", r.run_file},
      {"checkpoint", r.checkpoint}};
  if (r.test)
    j["test"] = {{"accuracy", r.test->accuracy},
                 {"correct", r.test->correct},
                 {"n", r.test->n},
                 {"loss", r.test->loss}};
  return j;
}

int run_train_command(const TrainCommand& command, std::ostream& out, std::ostream& err) {
  const auto config = config::load_config_reporting(command.config, command.overrides, err);
  if (!config) return kExitInvalid;
  StopSignals signals;
  StopSignals::clear();
  TrainOptions options = command.options;
  options.io_overlap = command.io_thread == "on"    ? engine::IoOverlap::kThread
                       : command.io_thread == "off" ? engine::IoOverlap::kInline
                                                    : engine::IoOverlap::kAuto;
  const auto caller_stop = options.stop_requested;
  options.stop_requested = [caller_stop] {
    const bool caller = caller_stop && caller_stop();
    return caller || StopSignals::received() != 0;
  };
  Progress progress(err, progress_style_for_stderr(command.quiet));
  const TrainResult result = train(*config, options, progress);
  progress.finish();
  if (command.format == "json")
    out << train_summary_json(result).dump(1) << '\n';
  else
    print_train_summary(out, result);
  if (result.interrupted) {
    const int signal = StopSignals::received();
    err << fmt::format(
        "poprun: {} at step {}: checkpoint written to {}; continue with --resume {}\n",
        signal == SIGINT    ? "stopped by SIGINT"
        : signal == SIGTERM ? "stopped by SIGTERM"
                            : "stopped",
        result.steps, result.checkpoint, result.checkpoint);
    return kExitInterrupted;
  }
  return kExitOk;
}

int run_eval_command(const EvalCommand& command, std::ostream& out, std::ostream& err) {
  const auto config = config::load_config_reporting(command.config, command.overrides, err);
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
                     100.0 * outcome.test.accuracy, outcome.test.correct, outcome.test.n);
  if (!command.options.run_file.empty())
    out << fmt::format("run file: {}\n", command.options.run_file);
  return kExitOk;
}

}  // namespace popkit::runner
