// The config's layer kinds (layer_kinds.h): linear, dropout, layer_norm, and the
// decoder-only transformer's embedding, decoder_block and lm_head.
#include "config/layer_kinds.h"

#include <fmt/format.h>

#include <array>

#include "config/names.h"

namespace popkit::config {
namespace {

// The kind whose keys include `key`.
std::string_view owner_of(std::string_view key);

SampleShape keeps_shape(const Attributes&, SampleShape in) {
  return in;
}

// Token ids travel as float32 (the host streams every tensor as float32), exact up to
// 2^24: a vocabulary is at most that.
constexpr std::int64_t kMaxVocabulary = std::int64_t{1} << 24;

bool vocabulary_ok(const Layer& layer, const std::string& path, RuleChecks& checks) {
  const std::string key = path + ".vocabulary";
  if (!checks.ok(key)) return false;
  const std::int64_t v = layer.attributes.integer("vocabulary");
  if (!checks.at_least(key, v, 1)) return false;
  if (v > kMaxVocabulary) {
    checks.error(key, fmt::format("a vocabulary is at most 2^24 = {} tokens (token ids are "
                                  "float32, exact up to 2^24), got {}",
                                  kMaxVocabulary, v));
    return false;
  }
  return true;
}

// A rate of inverted dropout, [0, 1).
void rate_ok(const Layer& layer, std::string_view key, const std::string& path,
             RuleChecks& checks) {
  const std::string at = fmt::format("{}.{}", path, key);
  if (!checks.ok(at)) return;
  const double rate = layer.attributes.number(key);
  if (!(rate >= 0 && rate < 1))
    checks.error(at, fmt::format("a dropout rate must be in [0, 1), got {}", rate));
}

// in x out elements fit in 64 bits (a weight's).
bool product_fits(std::int64_t a, std::int64_t b, const std::string& key, const char* what,
                  RuleChecks& checks) {
  std::int64_t n = 0;
  if (a > 0 && __builtin_mul_overflow(a, b, &n)) {
    checks.error(key, fmt::format("{} {} × {} overflows 64 bits", what, a, b));
    return false;
  }
  return true;
}

// ---- linear: y = act(x W + b) ------------------------------------------------------

std::vector<std::string_view> activation_names() {
  return enum_names<Activation>();
}

constexpr std::array<KindKey, 2> kLinearKeys{{
    integer_key("out_features"),
    choice_key("activation", "none", activation_names),
}};

// The whole sample, flattened, through x W + b (a sequence's positions included).
SampleShape linear_out_shape(const Attributes& a, SampleShape) {
  return {a.integer("out_features"), 1};
}

std::string linear_foreign_key(std::string_view key) {
  return fmt::format("{0} is a key of {1} layers (type: {1}), not of linear ones", key,
                     owner_of(key));
}

bool linear_check(const Layer& layer, SampleShape in, const std::string& path, RuleChecks& checks) {
  const std::string key = path + ".out_features";
  if (!checks.ok(key)) return false;  // missing or not an integer: reported
  const std::int64_t out = layer.attributes.integer("out_features");
  if (!checks.at_least(key, out, 1)) return false;
  // The weight holds in x out elements.
  return product_fits(in.width, out, key, "in_features × out_features", checks);
}

// ---- dropout: y = x * mask / (1 - rate) in training, y = x in evaluation -----------

constexpr std::array<KindKey, 1> kDropoutKeys{{number_key("rate")}};

std::string dropout_foreign_key(std::string_view key) {
  return fmt::format("a dropout layer takes name, type and rate, not {}{}", key,
                     key == "out_features" ? " (its output has its input's width)" : "");
}

bool dropout_check(const Layer& layer, SampleShape, const std::string& path, RuleChecks& checks) {
  // Inverted dropout keeps a fraction 1 - rate and scales it by 1 / (1 - rate).
  rate_ok(layer, "rate", path, checks);
  return true;
}

// ---- layer_norm: y = (x - mean) / sqrt(var + eps) * scale + shift, per sample --------

constexpr std::array<KindKey, 1> kLayerNormKeys{{number_key("eps", 1.0e-5)}};

std::string layer_norm_foreign_key(std::string_view key) {
  return fmt::format("a layer_norm layer takes name, type and eps, not {}{}", key,
                     key == "out_features" ? " (its output has its input's width)" : "");
}

// eps keeps 1 / sqrt(var + eps) finite for a constant sample.
void eps_ok(const Layer& layer, std::string_view kind, const std::string& path,
            RuleChecks& checks) {
  if (!checks.ok(path + ".eps")) return;
  const double eps = layer.attributes.number("eps");
  if (!(eps > 0 && eps < 1))
    checks.error(path + ".eps", fmt::format("a {} eps must be in (0, 1), got {}", kind, eps));
}

// Normalises each position of a sample over its features.
bool layer_norm_check(const Layer& layer, SampleShape, const std::string& path,
                      RuleChecks& checks) {
  eps_ok(layer, "layer_norm", path, checks);
  return true;
}

// ---- embedding: out[b, t] = wte[token[b, t]] + wpe[t] ------------------------------

constexpr std::array<KindKey, 3> kEmbeddingKeys{{
    integer_key("vocabulary"),
    integer_key("positions"),
    integer_key("width"),
}};

// Each of the input's T tokens becomes a position of `width` features.
SampleShape embedding_out_shape(const Attributes& a, SampleShape in) {
  return {in.width * a.integer("width"), in.width};
}

std::string embedding_foreign_key(std::string_view key) {
  return fmt::format(
      "an embedding layer takes name, type, vocabulary, positions and width, "
      "not {}",
      key);
}

bool embedding_check(const Layer& layer, SampleShape in, const std::string& path,
                     RuleChecks& checks) {
  const bool vocabulary = vocabulary_ok(layer, path, checks);
  const std::string width_key = path + ".width", positions_key = path + ".positions";
  const bool width =
      checks.ok(width_key) && checks.at_least(width_key, layer.attributes.integer("width"), 1);
  // Position t of a sample reads row t of the position table.
  if (checks.ok(positions_key) &&
      checks.at_least(positions_key, layer.attributes.integer("positions"), 1) && in.width > 0 &&
      layer.attributes.integer("positions") < in.width)
    checks.error(positions_key,
                 fmt::format("{} positions, but a sample is a sequence of {} tokens: the "
                             "position table needs a row per position (positions >= {})",
                             layer.attributes.integer("positions"), in.width, in.width));
  // Its output's width depends on the width key alone.
  if (!width) return false;
  const std::int64_t c = layer.attributes.integer("width");
  if (vocabulary)
    product_fits(layer.attributes.integer("vocabulary"), c, path + ".vocabulary",
                 "vocabulary × width", checks);
  return product_fits(in.width, c, width_key, "sequence × width", checks);
}

// ---- decoder_block: GPT-2's pre-LN block ------------------------------------------
//   h = x + dropout(proj(attention(ln1(x))));  y = h + dropout(fc2(gelu(fc(ln2(h)))))

constexpr std::array<KindKey, 5> kDecoderBlockKeys{{
    integer_key("heads"),
    integer_key("hidden"),
    number_key("attention_dropout", 0.0),
    number_key("residual_dropout", 0.0),
    number_key("eps", 1.0e-5),
}};

std::string decoder_block_foreign_key(std::string_view key) {
  return fmt::format(
      "a decoder_block layer takes name, type, heads, hidden, attention_dropout, "
      "residual_dropout and eps, not {}{}",
      key, key == "out_features" ? " (its output has its input's width)" : "");
}

bool decoder_block_check(const Layer& layer, SampleShape in, const std::string& path,
                         RuleChecks& checks) {
  const std::string heads_key = path + ".heads", hidden_key = path + ".hidden";
  if (checks.ok(heads_key) && checks.at_least(heads_key, layer.attributes.integer("heads"), 1) &&
      in.width > 0) {
    // Head h attends with features [h C / NH, (h + 1) C / NH) of each position.
    const std::int64_t heads = layer.attributes.integer("heads"), c = in.features();
    if (c % heads != 0)
      checks.error(heads_key, fmt::format("{} heads must divide the width, {} features a "
                                          "position; {} % {} = {}",
                                          heads, c, c, heads, c % heads));
  }
  if (checks.ok(hidden_key) && checks.at_least(hidden_key, layer.attributes.integer("hidden"), 1))
    product_fits(in.features(), layer.attributes.integer("hidden"), hidden_key, "width × hidden",
                 checks);
  rate_ok(layer, "attention_dropout", path, checks);
  rate_ok(layer, "residual_dropout", path, checks);
  eps_ok(layer, "decoder_block", path, checks);
  return true;
}

// ---- lm_head: logits[b, t] = x[b, t] W^T, W [vocabulary, width] ---------------------

constexpr std::array<KindKey, 2> kLmHeadKeys{{integer_key("vocabulary"), name_key("tied_to")}};

// vocabulary logits a position: the loss's classes.
SampleShape lm_head_out_shape(const Attributes& a, SampleShape in) {
  return {in.positions * a.integer("vocabulary"), in.positions};
}

std::string lm_head_foreign_key(std::string_view key) {
  return fmt::format("an lm_head layer takes name, type, vocabulary and tied_to, not {}", key);
}

bool lm_head_check(const Layer& layer, SampleShape in, const std::string& path,
                   RuleChecks& checks) {
  if (!vocabulary_ok(layer, path, checks)) return false;
  const std::int64_t v = layer.attributes.integer("vocabulary");
  return product_fits(in.features(), v, path + ".vocabulary", "width × vocabulary", checks) &&
         product_fits(in.positions, v, path + ".vocabulary", "positions × vocabulary", checks);
}

// The head reads the embedding's token table as its weight: the same [vocabulary, width].
void lm_head_check_tie(const Layer& layer, SampleShape in, const Layer& target,
                       const std::string& path, RuleChecks& checks) {
  const std::string key = path + ".tied_to";
  if (target.type != "embedding") {
    checks.error(key, fmt::format("a head is tied to an embedding's token table, but '{}' is "
                                  "a {} layer",
                                  target.name, target.type));
    return;
  }
  const std::int64_t v = layer.attributes.integer("vocabulary");
  const std::int64_t tv = target.attributes.integer("vocabulary");
  if (v != tv)
    checks.error(key, fmt::format("the head's vocabulary {} differs from embedding '{}''s {}: a "
                                  "tied head's weight is the token table [vocabulary, width]",
                                  v, target.name, tv));
  const std::int64_t tc = target.attributes.integer("width");
  if (in.width > 0 && in.features() != tc)
    checks.error(key, fmt::format("the head reads {} features a position, but embedding '{}' "
                                  "has width {}: a tied head's weight is the token table "
                                  "[vocabulary, width]",
                                  in.features(), target.name, tc));
}

const std::array<LayerKindRules, 6> kLayerKinds{{
    {"linear", kLinearKeys, /*gives_logits=*/true, "out_features", linear_out_shape,
     linear_foreign_key, linear_check, /*reads_tokens=*/false, "", nullptr},
    {"dropout", kDropoutKeys, /*gives_logits=*/false, "", keeps_shape, dropout_foreign_key,
     dropout_check, /*reads_tokens=*/false, "", nullptr},
    {"layer_norm", kLayerNormKeys, /*gives_logits=*/false, "", keeps_shape, layer_norm_foreign_key,
     layer_norm_check, /*reads_tokens=*/false, "", nullptr},
    {"embedding", kEmbeddingKeys, /*gives_logits=*/false, "width", embedding_out_shape,
     embedding_foreign_key, embedding_check, /*reads_tokens=*/true, "", nullptr},
    {"decoder_block", kDecoderBlockKeys, /*gives_logits=*/false, "", keeps_shape,
     decoder_block_foreign_key, decoder_block_check, /*reads_tokens=*/false, "", nullptr},
    {"lm_head", kLmHeadKeys, /*gives_logits=*/true, "vocabulary", lm_head_out_shape,
     lm_head_foreign_key, lm_head_check, /*reads_tokens=*/false, "tied_to", lm_head_check_tie},
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

std::vector<SampleShape> layer_shapes(const Model& model) {
  SampleShape sample;
  for (const std::int64_t d : model.input_shape)
    sample.width = (sample.width ? sample.width : 1) * d;
  std::vector<SampleShape> out;
  for (const Layer& layer : model.layers) {
    sample = layer_kind_rules(layer.type).out_shape(layer.attributes, sample);
    out.push_back(sample);
  }
  return out;
}

}  // namespace popkit::config
