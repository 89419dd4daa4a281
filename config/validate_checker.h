// The checker of a Config's rules (config/validate.h validate_config), one member function
// per section: validate.cpp holds the model's, replication's, training's and data's,
// validate_execution.cpp the execution mode's, explicit phases' and pipelining's. Private
// to those two files.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/suggest.h"
#include "config/config.h"
#include "config/diagnostics.h"
#include "config/kind_keys.h"
#include "config/layer_kinds.h"
#include "config/validate.h"

namespace popkit::config {

class Checker final : public RuleChecks {
 public:
  Checker(Config& config, const Locations& locations, std::vector<Diagnostic>& diagnostics)
      : c_(config), l_(locations), out_(diagnostics) {}

  void run() {
    if (c_.version != kSchemaVersion && ok("version")) {
      error("version", fmt::format("unsupported schema version {}; this popkit reads version {}",
                                   c_.version, kSchemaVersion));
    }
    check_name();
    text_input_shape();
    check_model();
    check_replication();
    check_variables_and_sharding();
    check_remote();
    check_execution();
    check_training();
    check_pipeline();
    check_data();
    check_tokens_and_ties();
    check_eval_and_device();
  }

 private:
  void report(Severity severity, const std::string& path, const std::string& message) {
    const Location at = l_.find(path);
    out_.push_back({severity, at.file, at.line, at.column, fmt::format("{}: {}", path, message)});
  }
  void error(const std::string& path, const std::string& message) override {
    report(Severity::kError, path, message);
  }
  void warning(const std::string& path, const std::string& message) {
    report(Severity::kWarning, path, message);
  }
  void note(const std::string& path, const std::string& message) {
    report(Severity::kNote, path, message);
  }
  [[nodiscard]] bool ok(const std::string& path) const override { return l_.usable(path); }

  // Range checks on one value; each reports "must be ..., got ...".
  bool at_least(const std::string& path, std::int64_t value, std::int64_t min) override {
    if (!ok(path) || value >= min) return ok(path);
    error(path, fmt::format("must be >= {}, got {}", min, value));
    return false;
  }
  void positive(const std::string& path, double value) override {
    if (ok(path) && !(std::isfinite(value) && value > 0)) {
      error(path, fmt::format("must be a finite number > 0, got {}", value));
    }
  }
  void non_negative(const std::string& path, double value) override {
    if (ok(path) && !(std::isfinite(value) && value >= 0)) {
      error(path, fmt::format("must be a finite number >= 0, got {}", value));
    }
  }
  void finite(const std::string& path, double value) {
    if (ok(path) && !std::isfinite(value))
      error(path, fmt::format("must be finite, got {}", value));
  }

  std::vector<std::string> grouping_names() const {
    std::vector<std::string> names;
    for (const auto& g : c_.replication.groupings) names.push_back(g.name);
    return names;
  }

  // A reference to a grouping by name must name one in replication.groupings.
  bool grouping_exists(const std::string& path, const std::string& name) {
    if (name.empty() || !ok(path) || !ok("replication.groupings")) return ok(path);
    if (c_.grouping(name)) return true;
    const auto names = grouping_names();
    const std::string hint = did_you_mean(name, names);
    error(path, fmt::format("unknown grouping '{}'{}", name,
                            names.empty()  ? " (replication.groupings defines none)"
                            : hint.empty() ? fmt::format(" (defined: {})", fmt::join(names, ", "))
                                           : hint));
    return false;
  }

  // The name is a folder's (runs/<name>/): ASCII letters, digits, '-', '_' and '.', not
  // '.' or '..' alone (this folder and its parent), at most kMaxRunNameLength characters.
  void check_name();

  void check_model();

  // PopXL ReplicaGrouping(group_size, stride) over replication factor R:
  // stride == 1 needs R % group_size == 0; stride != 1 needs stride × group_size == R.
  void check_replication();

  bool grouping_valid(const std::string& name) const {
    return name.empty() || std::find(valid_groupings_.begin(), valid_groupings_.end(), name) !=
                               valid_groupings_.end();
  }

  void check_variables_and_sharding();

  void check_remote();

  void check_execution();

  // Explicit phases: every layer's forward and backward exactly once; forwards in layer
  // order, backwards in reverse layer order; the last layer's backward right after its
  // forward in the same phase (its forward, loss and backward run together), which with
  // the two orders puts every forward before any backward.
  void check_phases();

  void check_training();

  // pipeline: the placement (every layer once, in model order), the stage count, and what
  // pipelining does not combine with; then execution.sync_pattern against the devices.
  void check_pipeline();

  // Each stage non-empty; every layer exactly once; stages and the layers within them in
  // model order, so each stage is a contiguous run of layers.
  bool check_placement();

  // A layout the written pattern cannot serve is an error; the default adapts to it.
  void check_sync_pattern();

  // The common keys, then the kind's own rules; the loader has refused another kind's keys.
  void check_optimizer(const Optimizer& o);

  void check_data();

  // validate_text.cpp: a language model's rules. Text data makes the input shape
  // [sequence_length] (before the model's rules run); its keys; a kind that reads tokens
  // comes first and needs text; a tie names another layer that the kind's rules accept,
  // with both layers' backwards in one phase.
  void text_input_shape();
  void check_text_data();
  void check_tokens_and_ties();
  void check_tie(std::size_t layer);

  void check_eval_and_device();

  Config& c_;
  const Locations& l_;
  std::vector<Diagnostic>& out_;
  bool factor_ok_ = false;
  bool inputs_ok_ = false;
  std::int64_t n_inputs_ = 1;
  std::int64_t logits_width_ = 0;  // the last layer's output width; 0 when unknown
  std::int64_t logits_positions_ = 1;
  std::vector<SampleShape> layer_inputs_;  // each layer's input sample (width 0: unknown)
  std::vector<std::string> valid_groupings_;
};

}  // namespace popkit::config
