// The rules of a Config, one function per section; see validate.h. Each message names
// the key path, the rule and the values involved. A layer's and an optimizer's own rules
// are their kind's (config/layer_kinds.h, config/optimizer_kinds.h); the execution
// rules are validate_execution.cpp's, and the checker is in validate_checker.h.
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
#include "config/validate_checker.h"

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
  if (gradient_accumulation > kMaxPipelinedAccumulation)
    return fmt::format(
        "{} pipeline stages run training.gradient_accumulation {} micro-batches a step, more "
        "than {}: the step's schedule lists every micro-batch of every stage; use a larger "
        "micro_batch_size or no pipeline",
        stages, gradient_accumulation, kMaxPipelinedAccumulation);
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

}  // namespace

void Checker::check_name() {
  const std::string& n = c_.name;
  if (!ok("name") || n.empty()) return;
  const auto bad = std::find_if_not(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
  constexpr const char* kRule =
      "a run's name names its folder runs/<name>/, so it is ASCII letters, digits, '-', '_' "
      "and '.'";
  if (bad != n.end())
    error("name", fmt::format("'{}' holds '{}': {}", shown(n), shown(std::string(1, *bad)), kRule));
  else if (n == "." || n == "..")
    error("name", fmt::format("'{}' names a folder that exists already, not a run: {}, but not "
                              "'.' or '..' alone",
                              n, kRule));
  else if (n.size() > kMaxRunNameLength)
    error("name",
          fmt::format("{} characters; a run's name is at most {}", n.size(), kMaxRunNameLength));
}

void Checker::check_model() {
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
  SampleShape in{n_inputs, 1};
  bool features_ok = inputs_ok;
  layer_inputs_.clear();
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
    layer_inputs_.push_back(features_ok ? in : kUnknownSample);
    const bool width_ok = kind.check(layer, layer_inputs_.back(), path, *this);
    if (i + 1 == m.layers.size() && !kind.gives_logits)
      error(path + ".type",
            fmt::format("the last layer gives the logits and must be {}, but '{}' is a {} "
                        "layer",
                        logit_kinds(), layer.name, layer.type));
    features_ok = features_ok && width_ok;
    in = width_ok ? kind.out_shape(layer.attributes, features_ok ? in : kUnknownSample)
                  : kUnknownSample;
  }
  logits_width_ = in.width;
  logits_positions_ = in.positions;
  finite("model.init.weights.normal.mean", m.init.weights_mean);
  positive("model.init.weights.normal.std", m.init.weights_std);
}

void Checker::check_replication() {
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

void Checker::check_variables_and_sharding() {
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

void Checker::check_remote() {
  if (c_.remote.weights && c_.execution.mode == ExecutionMode::kStandard && ok("remote.weights") &&
      ok("execution.mode")) {
    error("remote.weights",
          "remote weights need execution.mode: phased; standard mode keeps "
          "the weights on device for the whole step");
  }
}

void Checker::check_training() {
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

void Checker::check_optimizer(const Optimizer& o) {
  positive("training.optimizer.lr", o.lr);
  non_negative("training.optimizer.weight_decay", o.weight_decay);
  optimizer_kind_rules(o.type).check(o, *this);
}

void Checker::check_data() {
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
  check_text_data();
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

void Checker::check_eval_and_device() {
  at_least("eval.micro_batch_size", c_.eval.micro_batch_size, 0);
  at_least("eval.every", c_.eval.every, 0);
  // Which names exist, and what a profile file holds, is the loader's business: it
  // reads the file (config/yaml/profile.h).
  if (ok("device.profile") && c_.device.profile.empty())
    error("device.profile", "must name a device profile (ipu-mk2, cpu, ...) or a profile file");
}

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
