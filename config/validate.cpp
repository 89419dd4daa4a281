// The rules of a Config, one function per section; see validate.h. Each message names
// the key path, the rule and the values involved. A layer's and an optimizer's own rules
// are their kind's (config/layer_kinds.h, config/optimizer_kinds.h).
#include "config/validate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "base/suggest.h"
#include "config/device_profile.h"
#include "config/layer_kinds.h"
#include "config/names.h"
#include "config/optimizer_kinds.h"

namespace popkit::config {

Location Locations::find(const std::string& path) const {
  std::string p = path;
  while (!p.empty()) {
    if (const auto it = locations_.find(p); it != locations_.end()) return it->second;
    const std::size_t cut = p.find_last_of(".[");
    p = cut == std::string::npos ? "" : p.substr(0, cut);
  }
  if (file.empty()) return {};
  return {file, 1, 1};
}

bool Locations::usable(const std::string& path) const {
  if (poisoned_.empty()) return true;
  // `path` itself or an ancestor of it.
  for (std::string p = path; !p.empty();) {
    if (poisoned_.count(p)) return false;
    const std::size_t cut = p.find_last_of(".[");
    p = cut == std::string::npos ? "" : p.substr(0, cut);
  }
  // A descendant: the set is sorted, so one sits at the lower bound of each prefix.
  for (const char separator : {'.', '['}) {
    const std::string prefix = path + separator;
    const auto it = poisoned_.lower_bound(prefix);
    if (it != poisoned_.end() && it->compare(0, prefix.size(), prefix) == 0) return false;
  }
  return true;
}

std::string pipeline_accumulation_rule(std::int64_t stages, std::int64_t gradient_accumulation) {
  if (gradient_accumulation >= 2 * stages) return {};
  return fmt::format(
      "{} pipeline stages need training.gradient_accumulation >= 2 x stages = {}, got {}: "
      "with fewer micro-batches per step the pipeline's ramp-up and ramp-down are longer "
      "than its main phase, where every stage works (PopART's pipelining rule); raise "
      "gradient_accumulation to {} or use fewer stages",
      stages, 2 * stages, gradient_accumulation, 2 * stages);
}

SyncPattern sync_pattern(const Config& config) {
  if (config.execution.sync_pattern) return *config.execution.sync_pattern;
  const std::int64_t devices = config.replication.factor * config.pipeline.stages;
  const bool ladder_splits = devices == 1 || devices % 2 == 0;
  return config.execution.mode == ExecutionMode::kPhased && ladder_splits
             ? SyncPattern::kReplicaAndLadder
             : SyncPattern::kFull;
}

namespace {

// A config's name names its run folders (runs/<name>/): at most this many characters.
constexpr std::size_t kMaxRunNameLength = 128;

bool is_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// `s` as a message may show it: printable ASCII as is, other bytes (a NUL, a terminal's
// escape sequence) as \xNN, so an error never prints what the terminal would obey.
std::string shown(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    out += b >= 0x20 && b < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", b);
  }
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The kinds that may give the logits (be the last layer): "linear".
std::string logit_kinds() {
  std::vector<std::string_view> names;
  for (const LayerKindRules& kind : layer_kind_rules())
    if (kind.gives_logits) names.push_back(kind.type);
  return fmt::format("{}", fmt::join(names, " or "));
}

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
    check_model();
    check_replication();
    check_variables_and_sharding();
    check_remote();
    check_execution();
    check_training();
    check_pipeline();
    check_data();
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
  void check_name() {
    const std::string& n = c_.name;
    if (!ok("name") || n.empty()) return;
    const auto bad = std::find_if_not(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
    });
    constexpr const char* kRule =
        "a run's name names its folder runs/<name>/, so it is ASCII letters, digits, '-', '_' "
        "and '.'";
    if (bad != n.end())
      error("name",
            fmt::format("'{}' holds '{}': {}", shown(n), shown(std::string(1, *bad)), kRule));
    else if (n == "." || n == "..")
      error("name", fmt::format("'{}' names a folder that exists already, not a run: {}, but not "
                                "'.' or '..' alone",
                                n, kRule));
    else if (n.size() > kMaxRunNameLength)
      error("name",
            fmt::format("{} characters; a run's name is at most {}", n.size(), kMaxRunNameLength));
  }

  void check_model() {
    Model& m = c_.model;
    std::int64_t n_inputs = 1;
    bool inputs_ok = ok("model.input_shape");
    if (inputs_ok && m.input_shape.empty()) {
      error("model.input_shape", "needs at least one dimension");
      inputs_ok = false;
    }
    for (std::size_t i = 0; inputs_ok && i < m.input_shape.size(); ++i) {
      const std::string path = fmt::format("model.input_shape[{}]", i);
      if (m.input_shape[i] < 1) {
        error(path, fmt::format("a dimension must be >= 1, got {}", m.input_shape[i]));
        inputs_ok = false;
      } else if (__builtin_mul_overflow(n_inputs, m.input_shape[i], &n_inputs)) {
        error("model.input_shape",
              fmt::format("{} has more elements than fit in 64 bits", shape_text(m.input_shape)));
        inputs_ok = false;
      }
    }
    inputs_ok_ = inputs_ok;
    n_inputs_ = n_inputs;
    if (ok("model.layers") && l_.written("model.layers") && m.layers.empty()) {
      error("model.layers", "needs at least one layer");
    }
    std::map<std::string, std::size_t> first_by_name;
    std::int64_t in_features = n_inputs;
    bool features_ok = inputs_ok;
    for (std::size_t i = 0; i < m.layers.size(); ++i) {
      Layer& layer = m.layers[i];
      const std::string path = fmt::format("model.layers[{}]", i);
      if (ok(path + ".name")) {
        if (!is_name(layer.name)) {
          error(path + ".name", fmt::format("'{}' is not a name: use letters, digits and _, not "
                                            "starting with a digit",
                                            layer.name));
        } else if (const auto [it, inserted] = first_by_name.emplace(layer.name, i); !inserted) {
          error(path + ".name", fmt::format("'{}' is already the name of model.layers[{}]; layer "
                                            "names must be unique",
                                            layer.name, it->second));
        }
      }
      // A layer whose type failed to load has its default kind's keys.
      const LayerKindRules& kind = layer_kind_rules(layer.type);
      const bool width_ok = kind.check(layer, features_ok ? in_features : 0, path, *this);
      if (i + 1 == m.layers.size() && !kind.gives_logits)
        error(path + ".type",
              fmt::format("the last layer gives the logits and must be {}, but '{}' is a {} "
                          "layer",
                          logit_kinds(), layer.name, layer.type));
      features_ok = features_ok && width_ok;
      in_features = width_ok ? kind.out_width(layer.attributes, features_ok ? in_features : 0) : 0;
    }
    logits_width_ = in_features;
    finite("model.init.weights.normal.mean", m.init.weights_mean);
    positive("model.init.weights.normal.std", m.init.weights_std);
  }

  // PopXL ReplicaGrouping(group_size, stride) over replication factor R:
  // stride == 1 needs R % group_size == 0; stride != 1 needs stride × group_size == R.
  void check_replication() {
    Replication& r = c_.replication;
    const bool factor_ok = at_least("replication.factor", r.factor, 1);
    if (factor_ok && r.factor > kMaxReplicationFactor) {
      error("replication.factor",
            fmt::format("must be <= {}, got {}", kMaxReplicationFactor, r.factor));
    }
    factor_ok_ = factor_ok && r.factor <= kMaxReplicationFactor;
    for (auto& g : r.groupings) {
      if (g.all_replicas && factor_ok_) g.group_size = r.factor;
    }
    for (const auto& g : r.groupings) {
      const std::string path = "replication.groupings." + g.name;
      bool valid = ok(path);
      if (valid && !is_name(g.name)) {
        error(path, fmt::format("'{}' is not a name: use letters, digits and _, not starting "
                                "with a digit",
                                g.name));
      }
      valid = at_least(path + ".group_size", g.group_size, 1) && valid;
      valid = at_least(path + ".stride", g.stride, 1) && valid;
      if (!valid || !factor_ok_) continue;
      if (g.stride == 1 && r.factor % g.group_size != 0) {
        error(path + ".group_size",
              fmt::format("replication.factor {} % group_size {} = {}, but stride 1 needs "
                          "factor % group_size == 0",
                          r.factor, g.group_size, r.factor % g.group_size));
        // The usual cause is a changed factor (`--set replication.factor=1`): say the
        // one-line fix, and the spelling that makes the grouping follow the factor.
        note(path + ".group_size",
             fmt::format("for one group of all {} replicas, add --set {}.group_size={}, or "
                         "write `group_size: all` so that '{}' follows replication.factor",
                         r.factor, path, r.factor, g.name));
        continue;
      }
      if (g.all_replicas && g.stride != 1) {
        error(path + ".stride",
              fmt::format("group_size all puts every replica in one group, which needs stride 1, "
                          "got {}",
                          g.stride));
        continue;
      }
      std::int64_t product = 0;
      if (g.stride != 1 &&
          (__builtin_mul_overflow(g.stride, g.group_size, &product) || product != r.factor)) {
        const std::string shown =
            product == 0 && g.stride != 0 ? "more than 64 bits hold" : std::to_string(product);
        error(path + ".stride",
              fmt::format("{} × group_size {} = {}, but stride != 1 needs stride × group_size == "
                          "factor ({})",
                          g.stride, g.group_size, shown, r.factor));
        continue;
      }
      valid_groupings_.push_back(g.name);
    }
  }

  bool grouping_valid(const std::string& name) const {
    return name.empty() || std::find(valid_groupings_.begin(), valid_groupings_.end(), name) !=
                               valid_groupings_.end();
  }

  void check_variables_and_sharding() {
    const bool variables_ok = grouping_exists("variables.grouping", c_.variables.grouping) &&
                              grouping_valid(c_.variables.grouping);
    Sharding& s = c_.sharding;
    at_least("sharding.threshold", s.threshold, 1);
    const bool sharding_ok =
        grouping_exists("sharding.grouping", s.grouping) && grouping_valid(s.grouping);
    if (!s.enabled || !ok("sharding.enabled")) return;
    if (!factor_ok_ || !ok("replication.factor")) return;
    if (c_.replication.factor == 1) {
      warning("sharding",
              "replication.factor is 1, so there are no replicas to shard across; "
              "sharding is ignored (as PopART does)");
      s.enabled = false;
      return;
    }
    if (!s.weights && !s.optimizer_state && ok("sharding.weights") &&
        ok("sharding.optimizer_state")) {
      warning("sharding", "weights and optimizer_state are both false, so nothing is sharded");
    }
    if (!variables_ok || !sharding_ok) return;
    // The planner shards a variable within its variables group: every sharding group must
    // lie inside one variables group.
    const std::string& sharding_name = s.grouping.empty() ? c_.variables.grouping : s.grouping;
    const Grouping sg = *c_.grouping(sharding_name);
    const Grouping vg = *c_.grouping(c_.variables.grouping);
    if (sg.group_size == 1) {
      warning(s.grouping.empty() ? "sharding" : "sharding.grouping",
              fmt::format("grouping '{}' has groups of one replica, so every tensor stays whole",
                          sharding_name));
    }
    auto group_of = [](const Grouping& g, std::int64_t replica) {
      return g.stride == 1 ? replica / g.group_size : replica % g.stride;
    };
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>>
        seen;  // sharding group -> (replica, variables group)
    for (std::int64_t r = 0; r < c_.replication.factor; ++r) {
      const auto [it, inserted] = seen.emplace(group_of(sg, r), std::pair{r, group_of(vg, r)});
      if (!inserted && it->second.second != group_of(vg, r)) {
        error(s.grouping.empty() ? "sharding" : "sharding.grouping",
              fmt::format("the groups of sharding grouping '{}' must nest inside those of "
                          "variables grouping '{}', but replicas {} and {} share a sharding "
                          "group and are in variables groups {} and {}",
                          sharding_name.empty() ? "(all replicas)" : sharding_name,
                          c_.variables.grouping.empty() ? "(all replicas)" : c_.variables.grouping,
                          it->second.first, r, it->second.second, group_of(vg, r)));
        return;
      }
    }
  }

  void check_remote() {
    if (c_.remote.weights && c_.execution.mode == ExecutionMode::kStandard &&
        ok("remote.weights") && ok("execution.mode")) {
      error("remote.weights",
            "remote weights need execution.mode: phased; standard mode keeps "
            "the weights on device for the whole step");
    }
  }

  void check_execution() {
    Execution& e = c_.execution;
    at_least("execution.io_tiles", e.io_tiles, 0);
    if (ok("execution.io_mode") && ok("execution.io_tiles")) {
      const std::string_view mode = enum_name(e.io_mode);
      if (e.io_mode != IoMode::kCompute && e.io_tiles == 0) {
        error(
            l_.written("execution.io_tiles") ? "execution.io_tiles" : "execution.io_mode",
            fmt::format("io_mode {} needs io_tiles > 0 (the tiles set aside for IO), got 0", mode));
      } else if (e.io_mode == IoMode::kCompute && e.io_tiles > 0) {
        warning("execution.io_tiles",
                fmt::format("io_tiles {} is ignored with io_mode compute", e.io_tiles));
      }
    }
    if (e.io_schedule == IoSchedule::kPreload && ok("execution.io_schedule") &&
        ok("execution.mode") && ok("remote.weights")) {
      if (e.mode == ExecutionMode::kStandard) {
        error("execution.io_schedule",
              "preload loads the next phase's weights during the current phase, so it needs "
              "execution.mode: phased; standard mode runs one phase");
      } else if (!c_.remote.weights) {
        warning("execution.io_schedule",
                "preload is ignored without remote.weights: true (the weights stay on device, "
                "nothing is loaded)");
      }
    }
    if (e.phases_auto || !ok("execution.phases")) return;
    if (e.mode == ExecutionMode::kStandard && ok("execution.mode")) {
      error("execution.phases",
            "explicit phases need execution.mode: phased; standard mode runs "
            "one phase");
      return;
    }
    check_phases();
  }

  // Explicit phases: every layer's forward and backward exactly once; forwards in layer
  // order, backwards in reverse layer order; the last layer's backward right after its
  // forward in the same phase (its forward, loss and backward run together), which with
  // the two orders puts every forward before any backward.
  void check_phases() {
    const Execution& e = c_.execution;
    const auto& layers = c_.model.layers;
    if (e.phases.empty()) {
      error("execution.phases", "needs at least one phase (or write auto)");
      return;
    }
    if (!ok("model.layers") || layers.empty()) return;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (!ok(fmt::format("model.layers[{}].name", i))) return;
    }
    std::vector<std::string> names;
    for (const auto& layer : layers) names.push_back(layer.name);
    const std::set<std::string> known(names.begin(), names.end());
    struct Seen {
      std::size_t phase, index, order;
    };
    std::map<std::pair<std::string, Pass>, Seen> seen;
    bool complete = true;
    std::size_t order = 0;
    for (std::size_t p = 0; p < e.phases.size(); ++p) {
      const std::string phase_path = fmt::format("execution.phases[{}]", p);
      if (e.phases[p].empty()) {
        error(phase_path, "a phase needs at least one item");
        complete = false;
      }
      for (std::size_t i = 0; i < e.phases[p].size(); ++i, ++order) {
        const PhaseItem& item = e.phases[p][i];
        const std::string path = fmt::format("{}[{}]", phase_path, i);
        if (!known.count(item.layer)) {
          error(path,
                fmt::format("no layer named '{}'{}", item.layer, did_you_mean(item.layer, names)));
          complete = false;
          continue;
        }
        const auto [it, inserted] =
            seen.emplace(std::pair{item.layer, item.pass}, Seen{p, i, order});
        if (!inserted) {
          error(path,
                fmt::format("{}.{} appears twice (first at execution.phases[{}][{}]); "
                            "each layer's forward and backward run exactly once",
                            item.layer, enum_name(item.pass), it->second.phase, it->second.index));
          complete = false;
        }
      }
    }
    for (const auto& name : names) {
      for (Pass pass : {Pass::kForward, Pass::kBackward}) {
        if (!seen.count({name, pass})) {
          error("execution.phases",
                fmt::format("{}.{} is missing; every layer's forward and backward must appear "
                            "exactly once",
                            name, enum_name(pass)));
          complete = false;
        }
      }
    }
    if (!complete) return;
    auto item_path = [](const Seen& s) {
      return fmt::format("execution.phases[{}][{}]", s.phase, s.index);
    };
    for (std::size_t i = 1; i < names.size(); ++i) {
      const Seen& fwd = seen.at({names[i], Pass::kForward});
      const Seen& prev = seen.at({names[i - 1], Pass::kForward});
      if (fwd.order < prev.order) {
        error(item_path(fwd), fmt::format("{}.forward runs before {}.forward; forwards run in "
                                          "layer order",
                                          names[i], names[i - 1]));
      }
      const Seen& bwd = seen.at({names[i - 1], Pass::kBackward});
      const Seen& next = seen.at({names[i], Pass::kBackward});
      if (bwd.order < next.order) {
        error(item_path(bwd), fmt::format("{}.backward runs before {}.backward; backwards run "
                                          "in reverse layer order",
                                          names[i - 1], names[i]));
      }
    }
    const std::string& last = names.back();
    const Seen& fwd = seen.at({last, Pass::kForward});
    const Seen& bwd = seen.at({last, Pass::kBackward});
    if (bwd.phase != fwd.phase || bwd.order != fwd.order + 1) {
      error(item_path(bwd), fmt::format("{0}.backward must directly follow {0}.forward in the "
                                        "same phase (the last layer's forward, loss and "
                                        "backward run together)",
                                        last));
    }
  }

  void check_training() {
    Training& t = c_.training;
    const bool mb = at_least("training.micro_batch_size", t.micro_batch_size, 1);
    const bool ga = at_least("training.gradient_accumulation", t.gradient_accumulation, 1);
    if (t.epochs) at_least("training.epochs", *t.epochs, 1);
    if (t.steps) at_least("training.steps", *t.steps, 1);
    if (t.epochs && t.steps && ok("training.epochs") && ok("training.steps")) {
      error("training.steps", "give training.epochs or training.steps, not both");
    }
    std::int64_t samples = 0;
    if (mb && ga && factor_ok_ &&
        (__builtin_mul_overflow(t.micro_batch_size, t.gradient_accumulation, &samples) ||
         __builtin_mul_overflow(samples, c_.replication.factor, &samples))) {
      error("training.micro_batch_size",
            fmt::format("micro_batch_size {} × gradient_accumulation {} × replication.factor {} "
                        "(the samples of one optimizer step) overflows 64 bits",
                        t.micro_batch_size, t.gradient_accumulation, c_.replication.factor));
    }
    check_optimizer(t.optimizer);
  }

  // pipeline: the placement (every layer once, in model order), the stage count, and what
  // pipelining does not combine with; then execution.sync_pattern against the devices.
  void check_pipeline() {
    Pipeline& p = c_.pipeline;
    const auto& layers = c_.model.layers;
    const auto n_layers = static_cast<std::int64_t>(layers.size());
    if (!p.placement_auto && ok("pipeline.placement") && ok("model.layers")) {
      const auto placed = static_cast<std::int64_t>(p.placement.size());
      if (placed == 0) {
        error("pipeline.placement", "needs at least one stage (or write auto)");
        return;
      }
      if (l_.written("pipeline.stages") && ok("pipeline.stages") && p.stages != placed) {
        error("pipeline.stages",
              fmt::format("is {} but pipeline.placement lists {} stages", p.stages, placed));
        return;
      }
      p.stages = placed;
      if (!check_placement()) return;
    }
    if (!at_least("pipeline.stages", p.stages, 1) || !ok("model.layers") || n_layers == 0) return;
    if (p.stages > n_layers) {
      error("pipeline.stages",
            fmt::format("{} stages but model.layers has {} layer{}; each stage needs at least one",
                        p.stages, n_layers, n_layers == 1 ? "" : "s"));
      return;
    }
    if (p.enabled()) {
      if (c_.execution.mode == ExecutionMode::kPhased && ok("execution.mode")) {
        error("pipeline.stages",
              fmt::format("{} pipeline stages need execution.mode: standard; phased execution "
                          "already spreads the layers over time on one device, and phases "
                          "inside stages are not supported (docs/pipelining.md)",
                          p.stages));
      }
      if (c_.execution.io_mode == IoMode::kIoOverlapped && ok("execution.io_mode")) {
        error("execution.io_mode",
              "io_overlapped double-buffers the streams of a repeat loop, and a pipelined "
              "stage runs its micro-batches unrolled in 1F1B order, without one; use io or "
              "compute");
      }
      if (c_.remote.optimizer_state && ok("remote.optimizer_state")) {
        error("remote.optimizer_state",
              "pipeline stages keep their optimizer state on their own devices; remote "
              "optimizer state with pipeline.stages > 1 is not supported yet");
      }
      const std::string rule =
          pipeline_accumulation_rule(p.stages, c_.training.gradient_accumulation);
      if (!rule.empty() && ok("training.gradient_accumulation")) {
        error(l_.written("training.gradient_accumulation") ? "training.gradient_accumulation"
                                                           : "pipeline.stages",
              rule);
      }
    }
    check_sync_pattern();
  }

  // Each stage non-empty; every layer exactly once; stages and the layers within them in
  // model order, so each stage is a contiguous run of layers.
  bool check_placement() {
    const auto& layers = c_.model.layers;
    std::vector<std::string> names;
    for (const auto& l : layers) names.push_back(l.name);
    std::map<std::string, std::string> placed_at;  // layer -> its path
    std::size_t next = 0;                          // the layer model order expects next
    bool good = true;
    for (std::size_t s = 0; s < c_.pipeline.placement.size(); ++s) {
      const auto& stage = c_.pipeline.placement[s];
      const std::string stage_path = fmt::format("pipeline.placement[{}]", s);
      if (stage.empty()) {
        error(stage_path, "a stage needs at least one layer");
        good = false;
      }
      for (std::size_t i = 0; i < stage.size(); ++i) {
        const std::string path = fmt::format("{}[{}]", stage_path, i);
        const std::string& name = stage[i];
        const auto at = std::find(names.begin(), names.end(), name);
        if (at == names.end()) {
          error(path, fmt::format("unknown layer '{}'{}", name, did_you_mean(name, names)));
          good = false;
          continue;
        }
        if (const auto seen = placed_at.find(name); seen != placed_at.end()) {
          error(path, fmt::format("{} is placed twice (first at {}); every layer goes on "
                                  "exactly one stage",
                                  name, seen->second));
          good = false;
          continue;
        }
        placed_at.emplace(name, path);
        const auto index = static_cast<std::size_t>(at - names.begin());
        if (good && index != next) {
          error(path, fmt::format("{} is placed where model.layers has {}; a placement lists "
                                  "the layers in model order, each stage a contiguous run "
                                  "(the activations flow from stage to stage)",
                                  name, next < names.size() ? names[next] : name));
          good = false;
        }
        next = index + 1;
      }
    }
    if (!good) return false;
    std::vector<std::string> missing;
    for (const auto& name : names)
      if (!placed_at.count(name)) missing.push_back(name);
    if (!missing.empty()) {
      error("pipeline.placement",
            fmt::format("{} {} not placed; every layer goes on exactly one stage",
                        fmt::join(missing, ", "), missing.size() == 1 ? "is" : "are"));
      return false;
    }
    return true;
  }

  // A layout the written pattern cannot serve is an error; the default adapts to it.
  void check_sync_pattern() {
    const auto& written = c_.execution.sync_pattern;
    if (!written || !ok("execution.sync_pattern") || !factor_ok_) return;
    const std::int64_t devices = c_.replication.factor * c_.pipeline.stages;
    if (*written == SyncPattern::kSinglePipeline && c_.replication.factor > 1) {
      error("execution.sync_pattern",
            fmt::format("single_pipeline serves one pipeline, whose devices do their host IO "
                        "without waiting for each other; replication.factor {} runs {} "
                        "pipelines, whose replicas sync at every collective: use full or "
                        "replica_and_ladder",
                        c_.replication.factor, c_.replication.factor));
    } else if (*written == SyncPattern::kReplicaAndLadder && devices % 2 != 0 && devices > 1) {
      error("execution.sync_pattern",
            fmt::format("replica_and_ladder alternates IO between two equal ladder sets (the "
                        "even and the odd devices), and replication.factor {} x {} stage{} "
                        "= {} devices do not split in two; use full, or an even device count",
                        c_.replication.factor, c_.pipeline.stages,
                        c_.pipeline.stages == 1 ? "" : "s", devices));
    }
  }

  // The common keys, then the kind's own rules; the loader has refused another kind's keys.
  void check_optimizer(const Optimizer& o) {
    positive("training.optimizer.lr", o.lr);
    non_negative("training.optimizer.weight_decay", o.weight_decay);
    optimizer_kind_rules(o.type).check(o, *this);
  }

  void check_data() {
    Data& d = c_.data;
    finite("data.normalize_mean", d.normalize_mean);
    positive("data.normalize_std", d.normalize_std);
    const std::pair<const char*, const std::string*> files[] = {{"train_images", &d.train_images},
                                                                {"train_labels", &d.train_labels},
                                                                {"test_images", &d.test_images},
                                                                {"test_labels", &d.test_labels}};
    const bool dataset_ok = ok("data.dataset");
    for (const auto& [key, value] : files) {
      const std::string path = fmt::format("data.{}", key);
      if (!dataset_ok || !ok(path)) continue;
      if (d.dataset == Dataset::kIdx && value->empty()) {
        error(l_.written(path) ? path : "data.dataset",
              fmt::format("dataset idx needs data.{} (a path to an IDX file)", key));
      } else if (d.dataset != Dataset::kIdx && !value->empty()) {
        warning(path, fmt::format("only used with dataset: idx; ignored with dataset {}",
                                  enum_name(d.dataset)));
      }
    }
    if (d.dataset == Dataset::kSynthetic) {
      at_least("data.synthetic_train", d.synthetic_train, 1);
      at_least("data.synthetic_test", d.synthetic_test, 1);
      non_negative("data.synthetic_noise", d.synthetic_noise);
    }
    // MNIST and Fashion-MNIST: 28 × 28 grey images in 10 classes.
    if (!dataset_ok || (d.dataset != Dataset::kMnist && d.dataset != Dataset::kFashionMnist)) {
      return;
    }
    // The same 784 pixels in another shape ([784], [1, 784]) are not these images: the
    // engine takes rows × cols as the files give them.
    if (inputs_ok_ && c_.model.input_shape != std::vector<std::int64_t>{28, 28}) {
      error("model.input_shape",
            fmt::format("dataset {} has images of 28 × 28 pixels, so the input shape must be "
                        "[28, 28], got {}",
                        enum_name(d.dataset), shape_text(c_.model.input_shape)));
    }
    // The last layer's width (0 when unknown) is the number of classes.
    const auto& layers = c_.model.layers;
    if (!layers.empty() && logits_width_ > 0 && logits_width_ != 10) {
      const LayerKindRules& kind = layer_kind_rules(layers.back().type);
      const std::string path = fmt::format("model.layers[{}]{}{}", layers.size() - 1,
                                           kind.width_key.empty() ? "" : ".", kind.width_key);
      error(path, fmt::format("dataset {} has 10 classes, but the last layer '{}' has {} {}",
                              enum_name(d.dataset), layers.back().name,
                              kind.width_key.empty() ? "width" : kind.width_key, logits_width_));
    }
  }

  void check_eval_and_device() {
    at_least("eval.micro_batch_size", c_.eval.micro_batch_size, 0);
    at_least("eval.every", c_.eval.every, 0);
    // Which names exist, and what a profile file holds, is the loader's business: it
    // reads the file (config/yaml/profile.h).
    if (ok("device.profile") && c_.device.profile.empty())
      error("device.profile", "must name a device profile (ipu-mk2, cpu, ...) or a profile file");
  }

  Config& c_;
  const Locations& l_;
  std::vector<Diagnostic>& out_;
  bool factor_ok_ = false;
  bool inputs_ok_ = false;
  std::int64_t n_inputs_ = 1;
  std::int64_t logits_width_ = 0;  // the last layer's output width; 0 when unknown
  std::vector<std::string> valid_groupings_;
};

}  // namespace

void validate_config(Config& config, const Locations& locations,
                     std::vector<Diagnostic>& diagnostics) {
  Checker(config, locations, diagnostics).run();
}

std::vector<Diagnostic> validate_config(Config& config) {
  std::vector<Diagnostic> diagnostics;
  validate_config(config, Locations{}, diagnostics);
  return diagnostics;
}

}  // namespace popkit::config
