// The config's layer kinds (layer_kinds.h): linear and dropout.
#include "config/layer_kinds.h"

#include <fmt/format.h>

#include <array>

#include "config/names.h"

namespace popkit::config {
namespace {

// The kind whose keys include `key`.
std::string_view owner_of(std::string_view key);

// linear: y = act(x W + b).
constexpr std::array<KindKey<Layer>, 2> kLinearKeys{{
    {"out_features", &Layer::out_features, /*required=*/true},
    {"activation", &Layer::activation},
}};

std::string linear_foreign_key(std::string_view key) {
  return fmt::format("{0} is a key of {1} layers (type: {1}), not of linear ones", key,
                     owner_of(key));
}

// dropout: inverted dropout, y = x * mask / (1 - rate) in training, y = x in evaluation.
constexpr std::array<KindKey<Layer>, 1> kDropoutKeys{{
    {"rate", &Layer::rate, /*required=*/true},
}};

std::string dropout_foreign_key(std::string_view key) {
  return fmt::format("a dropout layer takes name, type and rate, not {}{}", key,
                     key == "out_features" ? " (its output has its input's width)" : "");
}

void dropout_check(const Layer& layer, const std::string& path, RuleChecks& checks) {
  // Inverted dropout keeps a fraction 1 - rate and scales it by 1 / (1 - rate).
  if (checks.ok(path + ".rate") && !(layer.rate >= 0 && layer.rate < 1))
    checks.error(path + ".rate",
                 fmt::format("a dropout rate must be in [0, 1), got {}", layer.rate));
}

void no_check(const Layer&, const std::string&, RuleChecks&) {}

const std::array<LayerKindRules, 2> kLayerKinds{{
    {LayerType::kLinear, kLinearKeys, /*keeps_width=*/false, /*gives_logits=*/true,
     linear_foreign_key, no_check},
    {LayerType::kDropout, kDropoutKeys, /*keeps_width=*/true, /*gives_logits=*/false,
     dropout_foreign_key, dropout_check},
}};

std::string_view owner_of(std::string_view key) {
  for (const LayerKindRules& kind : kLayerKinds)
    for (const KindKey<Layer>& k : kind.keys)
      if (k.name == key) return enum_name(kind.type);
  return "other";
}

}  // namespace

const LayerKindRules& layer_kind_rules(LayerType type) {
  return kind_entry(kLayerKinds, type);
}

std::span<const LayerKindRules> layer_kind_rules() {
  return kLayerKinds;
}

std::vector<std::string_view> layer_kind_keys() {
  return keys_of_kinds<LayerKindRules>(kLayerKinds);
}

}  // namespace popkit::config
