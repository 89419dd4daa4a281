#include "runner/resolved_config.h"

#include <fmt/format.h>

#include <string>

#include "config/layer_kinds.h"
#include "config/names.h"
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

}  // namespace

json resolved_config_json(const config::Config& c) {
  json layers = json::array();
  // Each layer with its kind's keys, as a config writes it (config/layer_kinds.h).
  for (const auto& l : c.model.layers) {
    json layer = {{"name", l.name}, {"type", name(enum_name(l.type))}};
    for (const auto& key : config::layer_kind_rules(l.type).keys)
      layer[std::string(key.name)] = planner::key_json(l, key);
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

}  // namespace popkit::runner
