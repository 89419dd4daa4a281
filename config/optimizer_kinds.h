// The config's optimizer kinds, one entry each in optimizer_kinds.cpp (DESIGN.md "Kinds"):
// the keys `training.optimizer` takes for the kind besides type, lr and weight_decay
// (config/kind_keys.h), and the rules over their values. The YAML reader, the key
// table, validation, the resolved config and plan files loop over this table; the
// planner (planner/optimizer_kinds.h: the state it keeps, its cost) and the engine
// (engine/tensor/optimizer.h: its step) have the same kinds' entries under the same names.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/kind_keys.h"

namespace popkit::config {

struct OptimizerKindRules {
  std::string_view type;          // training.optimizer.type: "adam", "sgd"
  std::span<const KindKey> keys;  // besides type and the common keys
  // Rules over its own keys' values; paths are "training.optimizer.<key>".
  void (*check)(const Optimizer& optimizer, RuleChecks& checks);
};

// The kind named `type`: null for a name without an entry, which the loader reports.
const OptimizerKindRules* find_optimizer_kind(std::string_view type);
const OptimizerKindRules& optimizer_kind_rules(std::string_view type);

// Every kind, in table order (the order messages list them).
std::span<const OptimizerKindRules> optimizer_kind_rules();
std::vector<std::string_view> optimizer_kind_names();

// The keys every kind takes, Optimizer's own members: lr and weight_decay.
std::span<const std::string_view> common_optimizer_keys();

// The keys of every kind, each once, in table order (after the common keys).
std::vector<std::string_view> optimizer_kind_keys();

// The error for `key`, a key of another kind, given to an optimizer of kind `kind`.
std::string foreign_optimizer_key(const OptimizerKindRules& kind, std::string_view key);

// An optimizer of kind `type` with its keys at their defaults, then `attributes` (each a
// key of the kind):  make_optimizer("sgd", {{"momentum", 0.9}})
Optimizer make_optimizer(std::string_view type, std::initializer_list<Attribute> attributes = {});

// `optimizer` made of kind `type`, its kind's keys at their defaults; lr and weight_decay,
// which every kind takes, kept.
void set_optimizer_type(Optimizer& optimizer, std::string_view type);

}  // namespace popkit::config
