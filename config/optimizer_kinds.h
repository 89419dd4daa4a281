// The config's optimizer kinds, each defined in one place (optimizer_kinds.cpp): the
// keys `training.optimizer` takes for the kind besides type, lr and weight_decay, and the
// rules over their values. The YAML reader, the key table, validation and plan files
// (planner/plan_json.cpp writes and reads a kind's keys from here) loop over this table.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/kind_keys.h"

namespace popkit::config {

struct OptimizerKindRules {
  OptimizerType type;
  std::span<const KindKey<Optimizer>> keys;  // besides type and the common keys
  // Rules over its own keys' values; paths are "training.optimizer.<key>".
  void (*check)(const Optimizer& optimizer, RuleChecks& checks);
};

const OptimizerKindRules& optimizer_kind_rules(OptimizerType type);

// Every kind, in the enum's order.
std::span<const OptimizerKindRules> optimizer_kind_rules();

// The keys every kind takes: lr and weight_decay.
std::span<const KindKey<Optimizer>> common_optimizer_keys();

// The keys of every kind, each once, in table order (after the common keys).
std::vector<std::string_view> optimizer_kind_keys();

}  // namespace popkit::config
