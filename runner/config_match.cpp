// Whether a checkpoint belongs to the config at hand. See config_match.h.
#include "runner/config_match.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>
#include <set>
#include <string_view>

#include "base/error.h"
#include "runner/agreement.h"
#include "runner/resolved_config.h"
#include "runner/run_dir.h"

namespace popkit::runner {
namespace {

using nlohmann::json;

std::string shown(const json* v) {
  if (v == nullptr) return "(not set)";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

void add_leaf_differences(const std::string& key, const json* a, const json* b,
                          std::vector<ConfigDifference>& out) {
  if (a != nullptr && b != nullptr && *a == *b) return;
  if (a != nullptr && b != nullptr && a->is_object() && b->is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a->items()) keys.insert(k);
    for (const auto& [k, v] : b->items()) keys.insert(k);
    for (const std::string& k : keys)
      add_leaf_differences(key.empty() ? k : key + "." + k, a->contains(k) ? &a->at(k) : nullptr,
                           b->contains(k) ? &b->at(k) : nullptr, out);
    return;
  }
  if (a != nullptr && b != nullptr && a->is_array() && b->is_array() && a->size() == b->size()) {
    for (std::size_t i = 0; i < a->size(); ++i)
      add_leaf_differences(fmt::format("{}[{}]", key, i), &a->at(i), &b->at(i), out);
    return;
  }
  out.push_back({key, shown(a), shown(b), false, false});
}

// The keys that decide what a run trains (config_match.h).
bool decides_training(const std::string& key) {
  const auto under = [&](std::string_view prefix) {
    return key == prefix ||
           (key.starts_with(prefix) && (key[prefix.size()] == '.' || key[prefix.size()] == '['));
  };
  if (under("model.init_from") || under("data.dir")) return false;
  return under("model") || under("training.optimizer") || under("training.seed") || under("data");
}

std::optional<std::int64_t> integer_at(const json& c, const json::json_pointer& at) {
  if (!c.contains(at) || !c.at(at).is_number_integer()) return std::nullopt;
  return c.at(at).get<std::int64_t>();
}

// micro_batch_size x gradient_accumulation x replication.factor.
std::optional<std::int64_t> global_batch(const json& c) {
  const auto b = integer_at(c, json::json_pointer("/training/micro_batch_size"));
  const auto a = integer_at(c, json::json_pointer("/training/gradient_accumulation"));
  const auto r = integer_at(c, json::json_pointer("/replication/factor"));
  if (!b || !a || !r) return std::nullopt;
  return *b * *a * *r;
}

// How many groups variables.grouping makes of the replicas: one value each.
std::optional<std::int64_t> variable_groups(const json& c) {
  const auto r = integer_at(c, json::json_pointer("/replication/factor"));
  const json::json_pointer name_at("/variables/grouping");
  if (!r || !c.contains(name_at) || !c.at(name_at).is_string()) return std::nullopt;
  const std::string name = c.at(name_at).get<std::string>();
  if (name.empty()) return 1;
  const json::json_pointer g("/replication/groupings/" + name);
  const auto size = integer_at(c, g / "group_size");
  const auto stride = integer_at(c, g / "stride");
  if (!size || !stride || *size < 1) return std::nullopt;
  return *stride == 1 ? *r / *size : *stride;
}

void add_derived_difference(const std::string& what, std::optional<std::int64_t> a,
                            std::optional<std::int64_t> b, std::vector<ConfigDifference>& out) {
  if (a == b) return;
  const auto text = [](std::optional<std::int64_t> v) {
    return v ? std::to_string(*v) : std::string("(not set)");
  };
  out.push_back({what, text(a), text(b), true, true});
}

std::vector<ConfigDifference> training_ones(const std::vector<ConfigDifference>& all, bool want) {
  std::vector<ConfigDifference> out;
  for (const ConfigDifference& d : all)
    if (d.decides_training == want) out.push_back(d);
  return out;
}

}  // namespace

std::vector<ConfigDifference> config_differences(const json& checkpoint_config,
                                                 const json& config) {
  std::vector<ConfigDifference> out;
  add_leaf_differences("", &checkpoint_config, &config, out);
  for (ConfigDifference& d : out) d.decides_training = decides_training(d.key);
  add_derived_difference(
      "the global batch (micro_batch_size x gradient_accumulation x replication.factor)",
      global_batch(checkpoint_config), global_batch(config), out);
  add_derived_difference("the variables' groups (variables.grouping of replication.factor)",
                         variable_groups(checkpoint_config), variable_groups(config), out);
  return out;
}

std::string describe(const std::vector<ConfigDifference>& differences) {
  std::vector<std::string> parts;
  for (const ConfigDifference& d : differences)
    parts.push_back(fmt::format("{} ({} there, {} here)", d.key, d.checkpoint_value, d.value));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string check_resume_config(const LoadedCheckpoint& checkpoint, const std::string& path,
                                const config::Config& config) {
  const CheckpointState& s = checkpoint.state;
  const std::string hash = config_hash(config);
  const std::string weights_only =
      fmt::format("or start from its weights alone with --init-from {}", path);
  if (s.config.empty()) {  // written before checkpoints carried their config
    if (s.config_hash == hash) return "";
    throw InputRefused(
        "{} was written under another config (hash {}, this one {}); it is older than "
        "checkpoints that carry their config, so the keys that differ cannot be named: resume "
        "with the config that wrote it, {}",
        path, s.config_hash, hash, weights_only);
  }
  const auto all = config_differences(json::parse(s.config), resolved_config_json(config));
  if (const auto training = training_ones(all, true); !training.empty()) {
    const std::filesystem::path beside =
        std::filesystem::path(path).parent_path() / kConfigFileName;
    std::error_code ec;
    throw InputRefused(
        "{} was written under another config: {}; a resumed run continues the same training "
        "(only how long it runs, where tensors live and how replicas split the global batch "
        "may change): resume with the config that wrote it{}, {}",
        path, describe(training),
        std::filesystem::exists(beside, ec) ? fmt::format(" ({})", beside.string()) : "",
        weights_only);
  }
  const auto others = training_ones(all, false);
  if (others.empty()) return "";
  return fmt::format(
      "note: {} was written under a different config (hash {}, this one {}), which differs only "
      "where the training is the same: {}; continuing from its state",
      path, s.config_hash, hash, describe(others));
}

void check_eval_config(const LoadedCheckpoint& checkpoint, const std::string& path,
                       const config::Config& config) {
  if (!checkpoint.has_state) return;
  const CheckpointState& s = checkpoint.state;
  const std::string hash = config_hash(config);
  std::string which;
  if (!s.config.empty()) {
    std::vector<ConfigDifference> differences;
    for (const ConfigDifference& d :
         config_differences(json::parse(s.config), resolved_config_json(config)))
      if (!d.derived && !d.key.starts_with("device.")) differences.push_back(d);
    if (differences.empty()) return;
    which = fmt::format(", which differs in {}", describe(differences));
  } else if (s.config_hash == hash) {
    return;
  }
  throw Error(
      "{} was trained under config '{}' (hash {}), not this one, '{}' (hash {}){}: its accuracy "
      "here would not measure it. Evaluate with the config (and the --set values) that trained "
      "it, or give --force to evaluate anyway",
      path, s.config_name, s.config_hash, config.name, hash, which);
}

}  // namespace popkit::runner
