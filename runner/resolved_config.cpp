#include "runner/resolved_config.h"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "config/names.h"
#include "config/yaml/profile.h"
#include "planner/plan_json.h"

namespace popkit::runner {
namespace {

using nlohmann::json;

// The vocabulary of plan files is the config's too: one set of names (config/names.h).
std::string name(std::string_view n) {
  return std::string(n);
}

json phases_json(const config::Execution& e) {
  if (e.phases_auto) return "auto";
  json phases = json::array();
  for (const auto& phase : e.phases) {
    json items = json::array();
    for (const auto& item : phase) items.push_back(item.layer + "." + name(enum_name(item.pass)));
    phases.push_back(items);
  }
  return phases;
}

// A string YAML reads back as that string without quotes: a name or a path, but not one
// of YAML's words for a boolean or null.
bool plain_scalar(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (const char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
          c == '/'))
      return false;
  std::string lower;
  for (const char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "null", "y", "n"})
    if (lower == word) return false;
  return true;
}

// A value in YAML's flow style: JSON's, with plain keys and strings where they read back.
std::string flow(const json& v) {
  if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    return plain_scalar(text) ? text : v.dump();
  }
  if (v.is_array()) {
    std::string out;
    for (const auto& item : v) out += (out.empty() ? "" : ", ") + flow(item);
    return "[" + out + "]";
  }
  if (v.is_object()) {
    std::string out;
    for (const auto& [key, item] : v.items())
      out += (out.empty() ? "" : ", ") + flow(json(key)) + ": " + flow(item);
    return "{" + out + "}";
  }
  return v.dump();
}

// A mapping in block style, `indent` spaces in: a section per map, a list of maps with
// an item per line, anything else on its key's line.
void block(std::string& out, const json& map, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (const auto& [key, value] : map.items()) {
    out += pad + flow(json(key)) + ":";
    if (value.is_object() && !value.empty()) {
      out += "\n";
      block(out, value, indent + 2);
    } else if (value.is_array() && !value.empty() && value.front().is_object()) {
      out += "\n";
      for (const auto& item : value) out += pad + "  - " + flow(item) + "\n";
    } else {
      out += " " + flow(value) + "\n";
    }
  }
}

}  // namespace

json resolved_config_json(const config::Config& c) {
  json layers = json::array();
  // Each layer with its kind's keys, as a config writes it (config/layer_kinds.h).
  for (const auto& l : c.model.layers) {
    json layer = {{"name", l.name}, {"type", l.type}};
    planner::put_attributes(layer, l.attributes);
    layers.push_back(std::move(layer));
  }
  json model = {
      {"input_shape", c.model.input_shape},
      {"layers", layers},
      {"loss", name(enum_name(c.model.loss))},
      {"init",
       {{"weights",
         {{"normal", {{"mean", c.model.init.weights_mean}, {"std", c.model.init.weights_std}}}}},
        {"biases", name(name_in(config::bias_init_names(), c.model.init.biases_zero))},
        {"seed", c.model.init.seed}}}};
  if (!c.model.init_from.empty()) model["init_from"] = c.model.init_from;
  json groupings = json::object();
  for (const auto& g : c.replication.groupings)
    groupings[g.name] = {{"group_size", g.group_size}, {"stride", g.stride}};
  json training = {{"micro_batch_size", c.training.micro_batch_size},
                   {"gradient_accumulation", c.training.gradient_accumulation},
                   {"optimizer", planner::optimizer_json(c.training.optimizer)},
                   {"seed", c.training.seed}};
  if (c.training.epochs) training["epochs"] = *c.training.epochs;
  if (c.training.steps) training["steps"] = *c.training.steps;
  json data = {{"dataset", name(enum_name(c.data.dataset))},
               {"shuffle", c.data.shuffle},
               {"normalize_mean", c.data.normalize_mean},
               {"normalize_std", c.data.normalize_std}};
  if (!c.data.dir.empty()) data["dir"] = c.data.dir;
  if (c.data.dataset == config::Dataset::kIdx) {
    data["train_images"] = c.data.train_images;
    data["train_labels"] = c.data.train_labels;
    data["test_images"] = c.data.test_images;
    data["test_labels"] = c.data.test_labels;
  }
  if (c.data.dataset == config::Dataset::kText) {
    data["path"] = c.data.path;
    data["sequence_length"] = c.data.sequence_length;
    data["validation_fraction"] = c.data.validation_fraction;
  }
  if (c.data.dataset == config::Dataset::kSynthetic) {
    data["synthetic_train"] = c.data.synthetic_train;
    data["synthetic_test"] = c.data.synthetic_test;
    data["synthetic_noise"] = c.data.synthetic_noise;
  }
  json out = {
      {"version", c.version},
      {"name", c.name},
      {"model", model},
      {"replication", {{"factor", c.replication.factor}, {"groupings", groupings}}},
      {"variables",
       {{"grouping", c.variables.grouping},
        {"retrieval_mode", name(enum_name(c.variables.retrieval_mode))}}},
      {"remote", {{"weights", c.remote.weights}, {"optimizer_state", c.remote.optimizer_state}}},
      {"execution",
       {{"mode", name(enum_name(c.execution.mode))},
        {"phases", phases_json(c.execution)},
        {"io_mode", name(enum_name(c.execution.io_mode))},
        {"io_tiles", c.execution.io_tiles}}},
      {"training", training},
      {"data", data},
      {"eval", {{"micro_batch_size", c.eval.micro_batch_size}, {"every", c.eval.every}}},
      {"device",
       {{"profile", c.device.profile}, {"memory_per_replica", c.device.memory_per_replica}}}};
  if (c.sharding.enabled)
    out["sharding"] = {{"threshold", c.sharding.threshold},
                       {"grouping", c.sharding.grouping},
                       {"weights", c.sharding.weights},
                       {"optimizer_state", c.sharding.optimizer_state}};
  // Written only when not the default, so configs written before the key existed keep
  // their hash (a checkpoint's config check).
  if (c.execution.io_schedule != config::IoSchedule::kOnDemand)
    out["execution"]["io_schedule"] = name(enum_name(c.execution.io_schedule));
  if (c.execution.sync_pattern)
    out["execution"]["sync_pattern"] = name(enum_name(*c.execution.sync_pattern));
  if (c.pipeline.enabled()) {
    out["pipeline"]["stages"] = c.pipeline.stages;
    if (c.pipeline.placement_auto)
      out["pipeline"]["placement"] = "auto";
    else
      out["pipeline"]["placement"] = c.pipeline.placement;
  }
  return out;
}

std::string config_hash(const config::Config& config) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char ch : resolved_config_json(config).dump()) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001B3ull;
  }
  return fmt::format("{:016x}", h);
}

std::string resolved_config_yaml(const config::Config& config, const std::string& command,
                                 const std::string& run_length) {
  json resolved = resolved_config_json(config);
  if (config::is_profile_path(config.device.profile) && config.device.resolved &&
      !config.device.resolved->source.empty())
    resolved["device"]["profile"] =
        std::filesystem::absolute(config.device.resolved->source).lexically_normal().string();
  // The keys in the order a config is written (json sorts them).
  std::string out = fmt::format(
      "# The config of this run as resolved (defaults and --set applied): popplan, poprun\n"
      "# and popreport load it as any config (`poprun eval RUN_DIR` takes it from here).\n"
      "# command: {}\n"
      "# config hash: {}\n",
      command.empty() ? std::string("(not recorded)") : command, config_hash(config));
  if (!run_length.empty())
    out += fmt::format(
        "# run length: {} from the command line, not the training section's; give it again\n",
        run_length);
  for (const char* section :
       {"version", "name", "model", "replication", "variables", "sharding", "remote", "execution",
        "pipeline", "training", "data", "eval", "device"})
    if (resolved.contains(section)) block(out, json{{section, resolved[section]}}, 0);
  return out;
}

}  // namespace popkit::runner
