// The config's layer kinds, each defined in one place (layer_kinds.cpp): the keys a
// layer of the kind takes besides name and type, the error for a key of another kind,
// whether it keeps its input's width and may give the logits, and the rules over its
// values. The YAML reader, the key table, validation and the resolved config loop over
// this table; schemas/config.schema.json has one if/then entry per kind, checked
// against it by the schema test.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/kind_keys.h"

namespace popkit::config {

struct LayerKindRules {
  LayerType type;
  std::span<const KindKey<Layer>> keys;  // besides name and type, in reading order
  // Its output has its input's width: out_features is not its key, and validation
  // writes the input's width into it. Otherwise out_features is one of its keys.
  bool keeps_width = false;
  bool gives_logits = false;  // may be the last layer (the loss reads its output)
  // The error for `key`, a key of another kind, given to a layer of this kind.
  std::string (*foreign_key)(std::string_view key);
  // Rules over its own keys' values; `path` is "model.layers[i]".
  void (*check)(const Layer& layer, const std::string& path, RuleChecks& checks);
};

const LayerKindRules& layer_kind_rules(LayerType type);

// Every kind, in the enum's order.
std::span<const LayerKindRules> layer_kind_rules();

// The keys of every kind, each once, in table order: what `model.layers[]` takes
// besides name and type.
std::vector<std::string_view> layer_kind_keys();

}  // namespace popkit::config
