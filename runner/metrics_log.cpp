// The per-step metrics log. See metrics_log.h.
#include "runner/metrics_log.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace popkit::runner {

MetricsLog::MetricsLog(const std::filesystem::path& path) : path_(path.string()) {
  file_.reset(std::fopen(path_.c_str(), "we"));
  if (!file_) throw Error("{}: cannot create the metrics log: {}", path_, std::strerror(errno));
}

std::string MetricsLog::write(const StepMetrics& m) {
  if (!file_) return "";
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  for (const auto& [name, seconds] : m.phase_seconds) {
    // Phase names are unique in a plan; a repeat would otherwise lose a figure.
    std::string key = name;
    for (int k = 2; phases.contains(key); ++k) key = name + "#" + std::to_string(k);
    phases[key] = seconds;
  }
  nlohmann::ordered_json line = {{"step", m.step},
                                 {"epoch", m.epoch},
                                 {"loss", m.loss},
                                 {"samples_per_second", m.samples_per_second},
                                 {"learning_rate", m.learning_rate},
                                 {"step_seconds", m.step_seconds},
                                 {"phase_seconds", phases}};
  if (m.test)
    line["test"] = {
        {"accuracy", m.test->accuracy}, {"loss", m.test->loss}, {"n_samples", m.test->n_samples}};
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + '\n';
  if (std::fwrite(text.data(), 1, text.size(), file_.get()) == text.size() &&
      std::fflush(file_.get()) == 0)
    return "";
  const std::string why = std::strerror(errno);
  file_.reset();
  return fmt::format(
      "{}: cannot write the metrics log: {}; it stops at step {} (the run file "
      "will hold every step's loss)",
      path_, why, m.step - 1);
}

}  // namespace popkit::runner
