// The config's layer kinds (layer_kinds.h): linear, dropout and layer_norm.
#include "config/layer_kinds.h"

#include <fmt/format.h>

#include <array>

#include "config/names.h"

namespace popkit::config {
namespace {

// The kind whose keys include `key`.
std::string_view owner_of(std::string_view key);

std::int64_t keeps_width(const Attributes&, std::int64_t in_width) {
  return in_width;
}

// ---- linear: y = act(x W + b) ------------------------------------------------------

std::vector<std::string_view> activation_names() {
  return enum_names<Activation>();
}

constexpr std::array<KindKey, 2> kLinearKeys{{
    integer_key("out_features"),
    choice_key("activation", "none", activation_names),
}};

std::int64_t linear_out_width(const Attributes& a, std::int64_t) {
  return a.integer("out_features");
}

std::string linear_foreign_key(std::string_view key) {
  return fmt::format("{0} is a key of {1} layers (type: {1}), not of linear ones", key,
                     owner_of(key));
}

bool linear_check(const Layer& layer, std::int64_t in_width, const std::string& path,
                  RuleChecks& checks) {
  const std::string key = path + ".out_features";
  if (!checks.ok(key)) return false;  // missing or not an integer: reported
  const std::int64_t out = layer.attributes.integer("out_features");
  if (!checks.at_least(key, out, 1)) return false;
  // The weight holds in x out elements.
  std::int64_t n_weights = 0;
  if (in_width > 0 && __builtin_mul_overflow(in_width, out, &n_weights)) {
    checks.error(key,
                 fmt::format("in_features {} × out_features {} overflows 64 bits", in_width, out));
    return false;
  }
  return true;
}

// ---- dropout: y = x * mask / (1 - rate) in training, y = x in evaluation -----------

constexpr std::array<KindKey, 1> kDropoutKeys{{number_key("rate")}};

std::string dropout_foreign_key(std::string_view key) {
  return fmt::format("a dropout layer takes name, type and rate, not {}{}", key,
                     key == "out_features" ? " (its output has its input's width)" : "");
}

bool dropout_check(const Layer& layer, std::int64_t, const std::string& path, RuleChecks& checks) {
  // Inverted dropout keeps a fraction 1 - rate and scales it by 1 / (1 - rate).
  if (!checks.ok(path + ".rate")) return true;
  const double rate = layer.attributes.number("rate");
  if (!(rate >= 0 && rate < 1))
    checks.error(path + ".rate", fmt::format("a dropout rate must be in [0, 1), got {}", rate));
  return true;
}

// ---- layer_norm: y = (x - mean) / sqrt(var + eps) * scale + shift, per sample --------

constexpr std::array<KindKey, 1> kLayerNormKeys{{number_key("eps", 1.0e-5)}};

std::string layer_norm_foreign_key(std::string_view key) {
  return fmt::format("a layer_norm layer takes name, type and eps, not {}{}", key,
                     key == "out_features" ? " (its output has its input's width)" : "");
}

bool layer_norm_check(const Layer& layer, std::int64_t, const std::string& path,
                      RuleChecks& checks) {
  // eps keeps 1 / sqrt(var + eps) finite for a constant sample.
  if (!checks.ok(path + ".eps")) return true;
  const double eps = layer.attributes.number("eps");
  if (!(eps > 0 && eps < 1))
    checks.error(path + ".eps", fmt::format("a layer_norm eps must be in (0, 1), got {}", eps));
  return true;
}

const std::array<LayerKindRules, 3> kLayerKinds{{
    {"linear", kLinearKeys, /*gives_logits=*/true, "out_features", linear_out_width,
     linear_foreign_key, linear_check},
    {"dropout", kDropoutKeys, /*gives_logits=*/false, "", keeps_width, dropout_foreign_key,
     dropout_check},
    {"layer_norm", kLayerNormKeys, /*gives_logits=*/false, "", keeps_width, layer_norm_foreign_key,
     layer_norm_check},
}};

std::string_view owner_of(std::string_view key) {
  for (const LayerKindRules& kind : kLayerKinds)
    if (find_key(kind.keys, key) != nullptr) return kind.type;
  return "other";
}

}  // namespace

const LayerKindRules* find_layer_kind(std::string_view type) {
  return find_kind(layer_kind_rules(), type);
}

const LayerKindRules& layer_kind_rules(std::string_view type) {
  return kind_entry(layer_kind_rules(), type);
}

std::span<const LayerKindRules> layer_kind_rules() {
  return kLayerKinds;
}

std::vector<std::string_view> layer_kind_names() {
  return kind_names(layer_kind_rules());
}

std::vector<std::string_view> layer_kind_keys() {
  return keys_of_kinds(layer_kind_rules());
}

Layer make_layer(std::string name, std::string_view type,
                 std::initializer_list<Attribute> attributes) {
  const LayerKindRules& kind = layer_kind_rules(type);
  Layer layer{std::move(name), std::string(type), default_attributes(kind.keys)};
  for (const Attribute& a : attributes) {
    POPKIT_ASSERT(find_key(kind.keys, a.key) != nullptr);
    layer.attributes.set(a.key, a.value);
  }
  // Keys in the kind's order, as the loader writes them.
  Attributes ordered;
  for (const KindKey& key : kind.keys)
    if (const AttributeValue* v = layer.attributes.find(key.name)) ordered.set(key.name, *v);
  layer.attributes = std::move(ordered);
  return layer;
}

std::vector<std::int64_t> layer_widths(const Model& model) {
  std::int64_t width = 1;
  for (const std::int64_t d : model.input_shape) width *= d;
  std::vector<std::int64_t> out;
  for (const Layer& layer : model.layers) {
    width = layer_kind_rules(layer.type).out_width(layer.attributes, width);
    out.push_back(width);
  }
  return out;
}

}  // namespace popkit::config
