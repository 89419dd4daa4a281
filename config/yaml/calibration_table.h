// A calibration table (`popplan calibrate --table FILE`): measured throughputs, one row
// per run, with the config that ran. CSV with a header line, `#` comments and blank
// lines allowed:
//   case,config,set,samples_per_second
//   no sharding,../../examples/mnist_offchip_optimizer.yaml,sharding.threshold=10000000000,43418.9
// `config` is relative to the table's directory; `set` holds `--set` overrides separated
// by spaces (may be empty), and `--eval` among them makes the row a measurement of the
// evaluation program (popplan plan --eval: forward only, eval.micro_batch_size, one run
// a batch) instead of training's. Every row's config is loaded (and its profile read),
// and every problem is a diagnostic at the table's line or in the config it names.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/diagnostics.h"

namespace popkit::config {

struct CalibrationEntry {
  std::string name;
  Config config;
  double samples_per_second = 0.0;
  bool eval = false;  // `--eval` in its set: measured running the evaluation program
};

struct CalibrationTable {
  std::vector<CalibrationEntry> entries;  // in the table's order; complete when no errors
  std::vector<Diagnostic> diagnostics;
  SourceMap sources;
  [[nodiscard]] bool ok() const { return !has_errors(diagnostics); }
};

CalibrationTable load_calibration_table(const std::string& path);

}  // namespace popkit::config
