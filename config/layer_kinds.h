// The config's layer kinds, one entry each in layer_kinds.cpp (DESIGN.md "Kinds"): the
// keys a layer of the kind takes besides name and type (config/kind_keys.h: type,
// default, choices), the error for a key of another kind, whether it may give the
// logits, the width of its output, and the rules over its values. The YAML reader, the
// key table, validation, the resolved config and plan files loop over this table; the
// planner (planner/layer_kinds.h) and the engine (engine/layer_kinds.h) have the same
// kinds' entries under the same names. schemas/config.schema.json has one if/then entry
// per kind, checked against this table by the schema test.
//
// A layer maps a sample of in_width elements to one of out_width elements (a sequence's
// T x C elements when a sample is a sequence of T positions of C features): the width
// each kind computes here is the one the planner's tensors and the engine's kernels use.
// A sample's positions start at 1 (an image is one position of all its pixels); a kind
// that reads tokens (the embedding) makes each input element, a token, a position.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/kind_keys.h"

namespace popkit::config {

// A sample as a layer takes or gives it: `width` elements over `positions` positions,
// width / positions features each. 0: unknown (an earlier key failed).
struct SampleShape {
  std::int64_t width = 0;
  std::int64_t positions = 1;
  [[nodiscard]] std::int64_t features() const { return positions > 0 ? width / positions : 0; }
};
inline constexpr SampleShape kUnknownSample{0, 0};

struct LayerKindRules {
  std::string_view type;          // the config's `type`: "linear", "dropout", ...
  std::span<const KindKey> keys;  // besides name and type, in reading order
  bool gives_logits = false;      // may be the last layer (the loss reads its output)
  // The key that sets its output's width, named by messages about that width; empty when
  // the output has the input's width.
  std::string_view width_key;
  // Its output's sample given its input's (width 0: unknown, and then 0 when it depends
  // on the input), for a layer whose keys passed its checks.
  SampleShape (*out_shape)(const Attributes& attributes, SampleShape in);
  // The error for `key`, a key of another kind, given to a layer of this kind.
  std::string (*foreign_key)(std::string_view key);
  // Rules over its own keys' values; `in` is the input's sample (width 0 when unknown: a
  // rule over both waits), `path` is "model.layers[i]". False when a key its output's
  // width depends on failed (the widths after it are then unknown).
  bool (*check)(const Layer& layer, SampleShape in, const std::string& path, RuleChecks& checks);
  // Its input is token ids (each a position), not features: it must be the first layer,
  // and the data must give tokens (dataset: text).
  bool reads_tokens = false;
  // The key naming another layer whose parameter this layer shares (a head tied to an
  // embedding: one variable, gradients summed), "" for none; check_tie's rules over the
  // two, called when the key names another layer of the model.
  std::string_view tie_key;
  void (*check_tie)(const Layer& layer, SampleShape in, const Layer& target,
                    const std::string& path, RuleChecks& checks) = nullptr;
};

// The kind named `type`: null for a name without an entry, which the loader reports.
const LayerKindRules* find_layer_kind(std::string_view type);
// The kind of a loaded layer, which has one (a bug otherwise).
const LayerKindRules& layer_kind_rules(std::string_view type);

// Every kind, in table order (the order messages list them).
std::span<const LayerKindRules> layer_kind_rules();
std::vector<std::string_view> layer_kind_names();

// The keys of every kind, each once, in table order: what `model.layers[]` takes
// besides name and type.
std::vector<std::string_view> layer_kind_keys();

// A layer of kind `type` with its keys at their defaults, then `attributes` (each a key
// of the kind): how code and tests build a config without YAML.
//   make_layer("fc1", "linear", {{"out_features", 512}, {"activation", "gelu"}})
Layer make_layer(std::string name, std::string_view type,
                 std::initializer_list<Attribute> attributes = {});

// The shape of each layer's output sample, in order, for a validated model.
std::vector<SampleShape> layer_shapes(const Model& model);

}  // namespace popkit::config
