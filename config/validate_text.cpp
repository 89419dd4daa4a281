// A language model's rules (validate_checker.h): text data and its keys, the input shape
// it gives, the kinds that read tokens, and tied parameters.
#include <fmt/format.h>

#include "base/suggest.h"
#include "config/layer_kinds.h"
#include "config/names.h"
#include "config/validate_checker.h"

namespace popkit::config {
namespace {

// Byte-level text: every byte is a token (engine/data/text_dataset.h).
constexpr std::int64_t kByteTokens = 256;

// "an embedding layer", "a decoder_block layer".
std::string a_kind(std::string_view type) {
  const bool vowel =
      !type.empty() && std::string_view("aeiou").find(type[0]) != std::string_view::npos;
  return fmt::format("{} {} layer", vowel ? "an" : "a", type);
}

bool is_text(const Config& c) {
  return c.data.dataset == Dataset::kText;
}

}  // namespace

void Checker::text_input_shape() {
  const Data& d = c_.data;
  if (!ok("data.dataset") || !is_text(c_) || !ok("data.sequence_length") || d.sequence_length < 1 ||
      !ok("model.input_shape"))
    return;
  const std::vector<std::int64_t> shape{d.sequence_length};
  if (!l_.written("model.input_shape")) {
    c_.model.input_shape = shape;
  } else if (c_.model.input_shape != shape) {
    error("model.input_shape",
          fmt::format("dataset text gives samples of data.sequence_length = {} tokens, so the "
                      "input shape is [{}] (or leave input_shape out), got [{}]",
                      d.sequence_length, d.sequence_length, fmt::join(c_.model.input_shape, ", ")));
  }
}

void Checker::check_text_data() {
  const Data& d = c_.data;
  if (!ok("data.dataset")) return;
  const char* keys[] = {"path", "sequence_length", "validation_fraction"};
  if (!is_text(c_)) {
    for (const char* key : keys) {
      const std::string path = fmt::format("data.{}", key);
      if (l_.written(path))
        warning(path, fmt::format("only used with dataset: text; ignored with dataset {}",
                                  enum_name(d.dataset)));
    }
    return;
  }
  if (ok("data.path") && d.path.empty())
    error(l_.written("data.path") ? "data.path" : "data.dataset",
          "dataset text needs data.path (a text file; a relative path is under data.dir, the "
          "data folder, as scripts/fetch_data.sh's text/fortunes.txt)");
  if (ok("data.sequence_length")) {
    if (d.sequence_length == 0 && !l_.written("data.sequence_length"))
      error("data.dataset",
            "dataset text needs data.sequence_length (the tokens of a sample, e.g. 128)");
    else
      at_least("data.sequence_length", d.sequence_length, 1);
  }
  if (ok("data.validation_fraction") && !(d.validation_fraction > 0 && d.validation_fraction < 1))
    error("data.validation_fraction",
          fmt::format("the share of the text that validates must be in (0, 1), got {}",
                      d.validation_fraction));
}

void Checker::check_tokens_and_ties() {
  const auto& layers = c_.model.layers;
  const bool dataset_ok = ok("data.dataset");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerKindRules& kind = layer_kind_rules(layers[i].type);
    const std::string path = fmt::format("model.layers[{}]", i);
    if (kind.reads_tokens && i > 0)
      error(path + ".type",
            fmt::format("{} reads token ids, so it is the first layer, but '{}' comes after "
                        "'{}'",
                        a_kind(kind.type), layers[i].name, layers[i - 1].name));
    if (kind.reads_tokens && i == 0 && dataset_ok && !is_text(c_))
      error("data.dataset",
            fmt::format("model.layers[0] '{}' is {}, which reads tokens: the data must give "
                        "tokens (dataset: text), not dataset {}",
                        layers[0].name, a_kind(kind.type), enum_name(c_.data.dataset)));
    if (!kind.tie_key.empty()) check_tie(i);
  }
  if (!dataset_ok || !is_text(c_) || layers.empty()) return;
  const LayerKindRules& first = layer_kind_rules(layers.front().type);
  if (!first.reads_tokens) {
    error("data.dataset", fmt::format("dataset text gives token ids: the first layer must read "
                                      "tokens (type: embedding), but '{}' is a {} layer",
                                      layers.front().name, layers.front().type));
    return;
  }
  // The loss predicts each position's next token out of the vocabulary's logits.
  if (logits_width_ <= 0) return;
  const LayerKindRules& last = layer_kind_rules(layers.back().type);
  const std::string path = fmt::format("model.layers[{}]{}{}", layers.size() - 1,
                                       last.width_key.empty() ? "" : ".", last.width_key);
  if (logits_positions_ != c_.data.sequence_length)
    error(path, fmt::format("dataset text predicts the next token at each of {} positions, but "
                            "the last layer '{}' gives {} position{} of logits",
                            c_.data.sequence_length, layers.back().name, logits_positions_,
                            logits_positions_ == 1 ? "" : "s"));
  else if (logits_width_ / logits_positions_ < kByteTokens)
    error(path, fmt::format("byte-level text has {} tokens, but the last layer '{}' gives {} "
                            "logits a position",
                            kByteTokens, layers.back().name, logits_width_ / logits_positions_));
}

void Checker::check_tie(std::size_t i) {
  const auto& layers = c_.model.layers;
  const Layer& layer = layers[i];
  const LayerKindRules& kind = layer_kind_rules(layer.type);
  const std::string key = fmt::format("model.layers[{}].{}", i, kind.tie_key);
  if (!ok(key)) return;
  const AttributeValue* value = layer.attributes.find(kind.tie_key);
  const std::string name = value != nullptr ? attribute_text(*value) : "";
  if (name.empty()) return;
  std::vector<std::string> names;
  const Layer* target = nullptr;
  for (const Layer& l : layers) {
    names.push_back(l.name);
    if (l.name == name) target = &l;
  }
  if (target == nullptr) {
    error(key, fmt::format("no layer is named '{}'{}", name, did_you_mean(name, names)));
    return;
  }
  if (target == &layer) {
    error(key, fmt::format("'{}' names the layer itself; a tie names another layer", name));
    return;
  }
  kind.check_tie(layer, layer_inputs_.size() > i ? layer_inputs_[i] : SampleShape{}, *target,
                 fmt::format("model.layers[{}]", i), *this);
}

}  // namespace popkit::config
