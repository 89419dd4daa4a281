// YAML -> Config: reads the tree of config/yaml/yaml_tree.h section by section, checks types,
// enums, required, unknown and duplicate keys, applies `--set` overrides to the tree
// first, then runs config/validate.h. Every problem becomes a diagnostic; nothing throws.
#include "config/yaml/load.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <variant>

#include "base/error.h"
#include "base/input_file.h"
#include "base/suggest.h"
#include "base/units.h"
#include "config/layer_kinds.h"
#include "config/names.h"
#include "config/optimizer_kinds.h"
#include "config/run_folder.h"
#include "config/validate.h"
#include "config/yaml/decoder.h"
#include "config/yaml/keys.h"
#include "config/yaml/overrides.h"
#include "config/yaml/profile.h"
#include "config/yaml/yaml_tree.h"

namespace popkit::config {
namespace {

class ConfigReader {
 public:
  ConfigReader(Decoder& decoder, const YamlNode& root) : d_(decoder), root_(root) {}

  Config read() {
    Config config;
    if (root_.kind == NodeKind::kNull) {
      d_.error(root_.location,
               "the config is empty; it needs at least version: 1 and model.layers");
      return config;
    }
    MapReader top(d_, &root_, "", "");
    if (root_.kind != NodeKind::kMap) return config;
    if (const auto* n = top.require("version", root_.location)) {
      std::int64_t version = 0;
      if (d_.integer(*n, "version", version)) {
        if (version != kSchemaVersion) {
          d_.bad(*n, "version",
                 fmt::format("unsupported schema version {}; this popkit reads version {}", version,
                             kSchemaVersion));
        }
        config.version = kSchemaVersion;
      }
    }
    if (const auto* n = top.get("name")) d_.string(*n, "name", config.name);
    read_model(top.require("model", root_.location), config.model);
    read_replication(top.get("replication"), config.replication);
    read_variables(top.get("variables"), config.variables);
    read_sharding(top.get("sharding"), config.sharding);
    read_remote(top.get("remote"), config.remote);
    read_execution(top.get("execution"), config.execution);
    read_pipeline(top.get("pipeline"), config.pipeline);
    read_training(top.get("training"), config.training);
    read_data(top.get("data"), config.data);
    read_eval(top.get("eval"), config.eval);
    read_device(top.get("device"), config.device);
    return config;
  }

 private:
  void read_model(const YamlNode* node, Model& model) {
    if (!node) return;
    MapReader m(d_, node, "model", "model");
    if (const auto* n = m.get("input_shape")) {
      if (n->kind != NodeKind::kSequence) {
        d_.bad(*n, "model.input_shape",
               fmt::format("expected a list of dimensions, got {}", describe(*n)));
      } else {
        model.input_shape.clear();
        for (std::size_t i = 0; i < n->items.size(); ++i) {
          const std::string path = fmt::format("model.input_shape[{}]", i);
          d_.locations().set(path, n->items[i]->location);
          std::int64_t dim = 0;
          if (!d_.integer(*n->items[i], path, dim)) d_.locations().poison("model.input_shape");
          model.input_shape.push_back(dim);
        }
      }
    }
    if (const auto* n = m.require("layers", node->location)) {
      if (n->kind != NodeKind::kSequence) {
        d_.bad(*n, "model.layers", fmt::format("expected a list of layers, got {}", describe(*n)));
      } else {
        for (std::size_t i = 0; i < n->items.size(); ++i) {
          model.layers.push_back(read_layer(*n->items[i], fmt::format("model.layers[{}]", i)));
        }
      }
    }
    if (const auto* n = m.get("loss")) d_.choice(*n, "model.loss", model.loss);
    if (const auto* n = m.get("init")) read_init(*n, model.init);
    if (const auto* n = m.get("init_from")) {
      if (d_.string(*n, "model.init_from", model.init_from) && model.init_from.empty()) {
        d_.bad(*n, "model.init_from", "expected a file path, got an empty string");
      }
    }
  }

  Layer read_layer(const YamlNode& node, const std::string& path) {
    Layer layer;
    d_.locations().set(path, node.location);
    MapReader l(d_, &node, path, "model.layers[]");
    if (node.kind != NodeKind::kMap) return layer;
    if (const auto* n = l.require("name", node.location))
      d_.string(*n, l.child("name"), layer.name);
    // An unknown type is reported; the layer is then read as one of the default kind.
    if (const auto* n = l.get("type"))
      d_.choice(*n, l.child("type"), layer_kind_names(), layer.type);
    // The kind's own keys; a key of another kind is an error, not ignored.
    const LayerKindRules& kind = layer_kind_rules(layer.type);
    for (const std::string_view key : layer_kind_keys()) {
      if (find_key(kind.keys, key) != nullptr) continue;
      if (const auto* n = l.get(key)) d_.bad(*n, l.child(key), kind.foreign_key(key));
    }
    read_kind_keys(l, node.location, kind.keys, layer.attributes);
    return layer;
  }

  // A kind's keys in the kind's order, each as its type. A key left out, or whose value
  // failed to load, holds its default; a required one then none (its rules check first).
  void read_kind_keys(MapReader& r, const Location& at, std::span<const KindKey> keys,
                      Attributes& into) {
    into = {};
    for (const KindKey& key : keys) {
      const YamlNode* n = key.required() ? r.require(key.name, at) : r.get(key.name);
      std::optional<AttributeValue> value;
      if (n) value = read_value(*n, r.child(key.name), key);
      if (value)
        into.set(key.name, std::move(*value));
      else if (!key.required())
        into.set(key.name, key.default_value());
    }
  }

  std::optional<AttributeValue> read_value(const YamlNode& node, const std::string& path,
                                           const KindKey& key) {
    switch (key.type) {
      case KeyType::kInteger:
        if (std::int64_t v = 0; d_.integer(node, path, v)) return v;
        return std::nullopt;
      case KeyType::kNumber:
        if (double v = 0; d_.number(node, path, v)) return v;
        return std::nullopt;
      case KeyType::kBoolean:
        if (bool v = false; d_.boolean(node, path, v)) return v;
        return std::nullopt;
      case KeyType::kChoice:
        if (std::string v; d_.choice(node, path, key.choices(), v)) return v;
        return std::nullopt;
      case KeyType::kName:
        if (std::string v; d_.string(node, path, v)) return v;
        return std::nullopt;
    }
    return std::nullopt;
  }

  void read_init(const YamlNode& node, Init& init) {
    MapReader i(d_, &node, "model.init", "model.init");
    if (const auto* n = i.get("weights")) {
      MapReader w(d_, n, "model.init.weights", "model.init.weights");
      if (const auto* normal = w.get("normal")) {
        MapReader p(d_, normal, "model.init.weights.normal", "model.init.weights.normal");
        if (const auto* v = p.get("mean")) d_.number(*v, p.child("mean"), init.weights_mean);
        if (const auto* v = p.get("std")) d_.number(*v, p.child("std"), init.weights_std);
      }
    }
    if (const auto* n = i.get("biases"))
      d_.choice(*n, "model.init.biases", bias_init_names(), init.biases_zero);
    if (const auto* n = i.get("seed")) d_.unsigned_integer(*n, "model.init.seed", init.seed);
  }

  void read_replication(const YamlNode* node, Replication& replication) {
    MapReader r(d_, node, "replication", "replication");
    if (const auto* n = r.get("factor")) d_.integer(*n, "replication.factor", replication.factor);
    if (const auto* n = r.get("groupings")) {
      if (n->kind == NodeKind::kNull) return;
      if (n->kind != NodeKind::kMap) {
        d_.bad(*n, "replication.groupings",
               fmt::format("expected a mapping of named groupings, e.g. everyone: {{group_size: "
                           "all}}, got {}",
                           describe(*n)));
        return;
      }
      for (const auto& [key, value] : n->pairs) {
        if (key->kind != NodeKind::kScalar) {
          d_.error(key->location, fmt::format("replication.groupings: grouping names must be "
                                              "names, got {}",
                                              describe(*key)));
          continue;
        }
        const std::string path = "replication.groupings." + key->value;
        if (!grouping_names_.insert(key->value).second) {
          d_.error(key->location, fmt::format("{}: duplicate grouping name; it is already "
                                              "defined at line {}",
                                              path, d_.locations().find(path).line));
          d_.report(Severity::kNote, d_.locations().find(path),
                    fmt::format("{} first defined here", path));
          continue;
        }
        d_.locations().set(path, key->location);
        Grouping grouping;
        grouping.name = key->value;
        MapReader g(d_, value.get(), path, "replication.groupings.*");
        if (value->kind == NodeKind::kMap) {
          const auto* size = g.get("group_size");
          if (!size || (size->kind == NodeKind::kScalar && size->plain && size->value == "all")) {
            grouping.all_replicas = true;
          } else {
            d_.integer(*size, g.child("group_size"), grouping.group_size);
          }
          if (const auto* v = g.get("stride")) d_.integer(*v, g.child("stride"), grouping.stride);
        }
        replication.groupings.push_back(grouping);
      }
    }
  }

  void read_variables(const YamlNode* node, Variables& variables) {
    MapReader v(d_, node, "variables", "variables");
    if (const auto* n = v.get("grouping")) d_.string(*n, "variables.grouping", variables.grouping);
    if (const auto* n = v.get("retrieval_mode")) {
      d_.choice(*n, "variables.retrieval_mode", variables.retrieval_mode);
    }
  }

  void read_sharding(const YamlNode* node, Sharding& sharding) {
    sharding.enabled = node != nullptr;
    MapReader s(d_, node, "sharding", "sharding", true);
    if (const auto* n = s.get("enabled")) d_.boolean(*n, "sharding.enabled", sharding.enabled);
    if (const auto* n = s.get("threshold"))
      d_.integer(*n, "sharding.threshold", sharding.threshold);
    if (const auto* n = s.get("grouping")) d_.string(*n, "sharding.grouping", sharding.grouping);
    if (const auto* n = s.get("weights")) d_.boolean(*n, "sharding.weights", sharding.weights);
    if (const auto* n = s.get("optimizer_state")) {
      d_.boolean(*n, "sharding.optimizer_state", sharding.optimizer_state);
    }
  }

  void read_remote(const YamlNode* node, Remote& remote) {
    MapReader r(d_, node, "remote", "remote");
    if (const auto* n = r.get("weights")) d_.boolean(*n, "remote.weights", remote.weights);
    if (const auto* n = r.get("optimizer_state")) {
      d_.boolean(*n, "remote.optimizer_state", remote.optimizer_state);
    }
  }

  void read_execution(const YamlNode* node, Execution& execution) {
    MapReader e(d_, node, "execution", "execution");
    if (const auto* n = e.get("mode")) d_.choice(*n, "execution.mode", execution.mode);
    if (const auto* n = e.get("phases")) read_phases(*n, execution);
    if (const auto* n = e.get("io_mode")) {
      d_.choice(*n, "execution.io_mode", execution.io_mode);
    }
    if (const auto* n = e.get("io_tiles")) d_.integer(*n, "execution.io_tiles", execution.io_tiles);
    if (const auto* n = e.get("io_schedule")) {
      d_.choice(*n, "execution.io_schedule", execution.io_schedule);
    }
    if (const auto* n = e.get("sync_pattern")) {
      SyncPattern pattern = SyncPattern::kFull;
      if (d_.choice(*n, "execution.sync_pattern", pattern)) execution.sync_pattern = pattern;
    }
  }

  // pipeline.placement: auto, or a list of stages, each a list of layer names. The
  // names are checked against model.layers by validation.
  void read_pipeline(const YamlNode* node, Pipeline& pipeline) {
    MapReader p(d_, node, "pipeline", "pipeline", /*null_is_empty=*/true);
    if (const auto* n = p.get("stages")) d_.integer(*n, "pipeline.stages", pipeline.stages);
    const auto* n = p.get("placement");
    if (!n || (n->kind == NodeKind::kScalar && n->value == "auto")) return;
    const std::string path = "pipeline.placement";
    const char* expected =
        "expected auto or a list of stages, each a list of layer names like "
        "[[fc1], [fc2, fc3]]";
    if (n->kind != NodeKind::kSequence) {
      d_.bad(*n, path, fmt::format("{}, got {}", expected, describe(*n)));
      return;
    }
    pipeline.placement_auto = false;
    for (std::size_t s = 0; s < n->items.size(); ++s) {
      const YamlNode& stage = *n->items[s];
      const std::string stage_path = fmt::format("{}[{}]", path, s);
      d_.locations().set(stage_path, stage.location);
      std::vector<std::string> names;
      if (stage.kind != NodeKind::kSequence) {
        d_.bad(
            stage, stage_path,
            fmt::format("expected a list of layer names like [fc2, fc3], got {}", describe(stage)));
        d_.locations().poison(path);
      } else {
        for (std::size_t i = 0; i < stage.items.size(); ++i) {
          const std::string item_path = fmt::format("{}[{}]", stage_path, i);
          d_.locations().set(item_path, stage.items[i]->location);
          std::string name;
          if (d_.string(*stage.items[i], item_path, name)) {
            names.push_back(name);
          } else {
            d_.locations().poison(path);
          }
        }
      }
      pipeline.placement.push_back(std::move(names));
    }
  }

  void read_phases(const YamlNode& node, Execution& execution) {
    const std::string path = "execution.phases";
    if (node.kind == NodeKind::kScalar && node.value == "auto") {
      execution.phases_auto = true;
      return;
    }
    if (node.kind != NodeKind::kSequence) {
      d_.bad(node, path,
             fmt::format("expected auto or a list of phases, each a list like [fc1.forward], "
                         "got {}",
                         describe(node)));
      return;
    }
    execution.phases_auto = false;
    for (std::size_t p = 0; p < node.items.size(); ++p) {
      const YamlNode& phase = *node.items[p];
      const std::string phase_path = fmt::format("{}[{}]", path, p);
      d_.locations().set(phase_path, phase.location);
      std::vector<PhaseItem> items;
      if (phase.kind != NodeKind::kSequence) {
        d_.bad(phase, phase_path,
               fmt::format("expected a list of items like [fc1.forward, fc1.backward], got {}",
                           describe(phase)));
        d_.locations().poison(path);
        execution.phases.push_back(items);
        continue;
      }
      for (std::size_t i = 0; i < phase.items.size(); ++i) {
        const YamlNode& item = *phase.items[i];
        const std::string item_path = fmt::format("{}[{}]", phase_path, i);
        d_.locations().set(item_path, item.location);
        std::string text;
        const auto dot = item.kind == NodeKind::kScalar ? item.value.rfind('.') : std::string::npos;
        if (!d_.string(item, item_path, text) || dot == std::string::npos || dot == 0) {
          if (item.kind == NodeKind::kScalar) {
            d_.bad(
                item, item_path,
                fmt::format("expected <layer>.forward or <layer>.backward, got '{}'", item.value));
          }
          d_.locations().poison(path);
          continue;
        }
        PhaseItem phase_item;
        phase_item.layer = text.substr(0, dot);
        YamlNode pass = item;
        pass.value = text.substr(dot + 1);
        pass.location.column += static_cast<int>(dot) + 1;
        if (!d_.choice(pass, item_path, phase_item.pass)) {
          d_.locations().poison(path);
          continue;
        }
        items.push_back(phase_item);
      }
      execution.phases.push_back(items);
    }
  }

  void read_training(const YamlNode* node, Training& training) {
    MapReader t(d_, node, "training", "training");
    if (const auto* n = t.get("micro_batch_size")) {
      d_.integer(*n, "training.micro_batch_size", training.micro_batch_size);
    }
    if (const auto* n = t.get("gradient_accumulation")) {
      d_.integer(*n, "training.gradient_accumulation", training.gradient_accumulation);
    }
    std::int64_t value = 0;
    if (const auto* n = t.get("epochs"); n && d_.integer(*n, "training.epochs", value)) {
      training.epochs = value;
    }
    if (const auto* n = t.get("steps"); n && d_.integer(*n, "training.steps", value)) {
      training.steps = value;
    }
    if (const auto* n = t.get("optimizer")) {
      Optimizer& o = training.optimizer;
      MapReader r(d_, n, "training.optimizer", "training.optimizer");
      // An unknown type is reported; the keys are then read as the default kind's.
      if (const auto* v = r.get("type"))
        d_.choice(*v, r.child("type"), optimizer_kind_names(), o.type);
      if (const auto* v = r.get("lr")) d_.number(*v, r.child("lr"), o.lr);
      if (const auto* v = r.get("weight_decay"))
        d_.number(*v, r.child("weight_decay"), o.weight_decay);
      const OptimizerKindRules& kind = optimizer_kind_rules(o.type);
      for (const std::string_view key : optimizer_kind_keys()) {
        if (find_key(kind.keys, key) != nullptr) continue;
        if (const auto* v = r.get(key)) d_.bad(*v, r.child(key), foreign_optimizer_key(kind, key));
      }
      read_kind_keys(r, n->location, kind.keys, o.attributes);
    }
    if (const auto* n = t.get("seed")) d_.unsigned_integer(*n, "training.seed", training.seed);
  }

  void read_data(const YamlNode* node, Data& data) {
    MapReader r(d_, node, "data", "data");
    if (const auto* n = r.get("dataset")) d_.choice(*n, "data.dataset", data.dataset);
    if (const auto* n = r.get("shuffle")) d_.boolean(*n, "data.shuffle", data.shuffle);
    if (const auto* n = r.get("normalize_mean"))
      d_.number(*n, "data.normalize_mean", data.normalize_mean);
    if (const auto* n = r.get("normalize_std"))
      d_.number(*n, "data.normalize_std", data.normalize_std);
    const std::pair<const char*, std::string*> paths[] = {{"dir", &data.dir},
                                                          {"train_images", &data.train_images},
                                                          {"train_labels", &data.train_labels},
                                                          {"test_images", &data.test_images},
                                                          {"test_labels", &data.test_labels},
                                                          {"path", &data.path}};
    for (const auto& [key, field] : paths) {
      if (const auto* n = r.get(key)) d_.string(*n, r.child(key), *field);
    }
    if (const auto* n = r.get("synthetic_train")) {
      d_.integer(*n, "data.synthetic_train", data.synthetic_train);
    }
    if (const auto* n = r.get("synthetic_test")) {
      d_.integer(*n, "data.synthetic_test", data.synthetic_test);
    }
    if (const auto* n = r.get("synthetic_noise")) {
      d_.number(*n, "data.synthetic_noise", data.synthetic_noise);
    }
    if (const auto* n = r.get("sequence_length"))
      d_.integer(*n, "data.sequence_length", data.sequence_length);
    if (const auto* n = r.get("validation_fraction"))
      d_.number(*n, "data.validation_fraction", data.validation_fraction);
  }

  void read_eval(const YamlNode* node, Eval& eval) {
    MapReader r(d_, node, "eval", "eval");
    if (const auto* n = r.get("micro_batch_size")) {
      d_.integer(*n, "eval.micro_batch_size", eval.micro_batch_size);
    }
    if (const auto* n = r.get("every")) d_.integer(*n, "eval.every", eval.every);
  }

  void read_device(const YamlNode* node, Device& device) {
    MapReader r(d_, node, "device", "device");
    if (const auto* n = r.get("profile")) d_.string(*n, "device.profile", device.profile);
    if (const auto* n = r.get("memory_per_replica")) {
      d_.bytes(*n, "device.memory_per_replica", device.memory_per_replica);
    }
  }

  Decoder& d_;
  const YamlNode& root_;
  std::set<std::string> grouping_names_;
};

// Source order: no position first, then the file, then `--set`; a note stays after the
// diagnostic it belongs to.
void sort_diagnostics(std::vector<Diagnostic>& diagnostics, const std::string& file) {
  std::vector<std::vector<Diagnostic>> groups;
  for (auto& d : diagnostics) {
    if (d.severity == Severity::kNote && !groups.empty()) {
      groups.back().push_back(std::move(d));
    } else {
      groups.push_back({std::move(d)});
    }
  }
  auto key = [&](const std::vector<Diagnostic>& g) {
    const Diagnostic& d = g.front();
    const int source = d.line == 0 ? 0 : d.file == file ? 1 : 2;
    return std::make_tuple(source, d.line, d.column);
  };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const auto& a, const auto& b) { return key(a) < key(b); });
  diagnostics.clear();
  for (auto& g : groups) {
    for (auto& d : g) diagnostics.push_back(std::move(d));
  }
}

// Reads the profile device.profile names (a path relative to the config file's
// directory, or to the working directory when --set gave it) into config.device.resolved; its
// errors point into the profile file, with a note at device.profile.
void read_profile(Config& config, const std::string& filename, const Location& where,
                  LoadResult& result) {
  // A path given with --set is the user's, relative to the working directory.
  const std::string base =
      where.file == kSetSource ? "" : std::filesystem::path(filename).parent_path().string();
  ProfileLoad profile = resolve_profile(config.device.profile, base, where);
  for (auto& [name, text] : profile.sources) result.sources[name] = std::move(text);
  const bool in_file =
      !profile.diagnostics.empty() && profile.diagnostics.front().file != where.file;
  // In line order, so the note, which belongs to the diagnostic before it, comes last.
  std::stable_sort(profile.diagnostics.begin(), profile.diagnostics.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                   });
  for (auto& d : profile.diagnostics) result.diagnostics.push_back(std::move(d));
  if (in_file)
    result.diagnostics.push_back(
        {Severity::kNote, where.file, where.line, where.column,
         fmt::format("device.profile '{}' is read here", config.device.profile)});
  config.device.resolved = std::move(profile.profile);
}

}  // namespace

LoadResult load_config_string(std::string_view yaml, const std::string& filename,
                              const std::vector<std::string>& overrides) {
  LoadResult result;
  result.sources[filename] = std::string(yaml);
  std::vector<Diagnostic>& diagnostics = result.diagnostics;
  YamlNodePtr root = parse_yaml(yaml, filename, diagnostics);
  if (!overrides.empty()) {
    std::string joined;
    for (const auto& o : overrides) joined += o + "\n";
    result.sources[kSetSource] = joined;
  }
  if (!root) {
    sort_diagnostics(diagnostics, filename);
    return result;
  }
  const std::int64_t factor_in_file = file_factor(*root);
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    root = apply_override(root, overrides[i], static_cast<int>(i) + 1, diagnostics);
  }
  Locations locations;
  locations.file = filename;
  Decoder decoder(diagnostics, locations);
  Config config = ConfigReader(decoder, *root).read();
  if (!has_errors(diagnostics) || root->kind == NodeKind::kMap) {
    validate_config(config, locations, diagnostics);
    if (!overrides.empty()) warn_stale_groupings(config, factor_in_file, locations, diagnostics);
  }
  if (locations.usable("device.profile") && !config.device.profile.empty())
    read_profile(config, filename, locations.find("device.profile"), result);
  sort_diagnostics(diagnostics, filename);
  if (!has_errors(diagnostics)) result.config = std::move(config);
  return result;
}

std::optional<Config> load_config_reporting(const std::string& path,
                                            const std::vector<std::string>& overrides,
                                            std::ostream& err) {
  auto result = load_config_file(path, overrides);
  print_diagnostics(err, result.diagnostics, result.sources);
  return result.config;
}

std::string config_name_problem(const std::string& path) {
  std::error_code ec;
  if (named_as(path, {".yaml", ".yml"}) || !std::filesystem::is_regular_file(path, ec)) return {};
  return "is not a config file: a config's name ends in .yaml or .yml (or give a run folder, or "
         "its run.json); it was not read";
}

LoadResult load_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  auto fail = [&](std::string message) {
    LoadResult result;
    result.diagnostics.push_back({Severity::kError, path, 0, 0, std::move(message)});
    return result;
  };
  if (const std::string file = config_file_of(path); file != path)
    return load_config_file(file, overrides);
  if (std::string why = config_name_problem(path); !why.empty()) return fail(std::move(why));
  std::string text;
  try {
    InputFile file = open_input_file(path, "give the path of a YAML config file");
    if (file.size() > kMaxSourceBytes) {
      return fail(fmt::format("the file is {} bytes; a config may be at most {} bytes", file.size(),
                              kMaxSourceBytes));
    }
    text = file.read_all(kMaxSourceBytes, "config");
  } catch (const Error& e) {
    // The diagnostic carries the path itself: drop the "PATH: " the exception starts with.
    const std::string what = e.what();
    return fail(what.substr(what.rfind(path + ": ", 0) == 0 ? path.size() + 2 : 0));
  }
  return load_config_string(text, path, overrides);
}

}  // namespace popkit::config
