// A kind's keys as a kind table (config/layer_kinds.h, config/optimizer_kinds.h) declares
// them: each key's name, the type of its value, its default (none: required) and, for a
// choice, the names it takes. Generic code (the YAML reader, the key table, plan files,
// the resolved config, the schema test) reads and writes a kind's keys from its table
// entry without knowing the kind; the values live in Attributes (config/attributes.h).
// RuleChecks is what a kind's rules ask of validation (config/validate.cpp implements
// it); kind_entry finds a kind's entry in any library's kind table by the kind's name.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.h"
#include "config/attributes.h"

namespace popkit::config {

// kName: a name of something else in the config (a layer's, for `tied_to`), "" for none.
enum class KeyType { kInteger, kNumber, kBoolean, kChoice, kName };

struct KindKey {
  std::string_view name;
  KeyType type = KeyType::kNumber;
  // The value when the key is left out; std::monostate: the key is required (the loader
  // reports it missing when the kind is chosen). A choice's default is its name.
  std::variant<std::monostate, std::int64_t, double, bool, std::string_view> fallback;
  // kChoice: the names it takes, in the order messages list them.
  std::vector<std::string_view> (*choices)() = nullptr;

  [[nodiscard]] bool required() const { return std::holds_alternative<std::monostate>(fallback); }
  // The default as an attribute value (a required key has none: a bug to ask).
  [[nodiscard]] AttributeValue default_value() const;
  // Whether `value` is one of the key's: of its type, and for a choice one of its names.
  [[nodiscard]] bool accepts(const AttributeValue& value) const;
};

// Table entries read as what they are.
constexpr KindKey integer_key(std::string_view name) {
  return {name, KeyType::kInteger, std::monostate{}, nullptr};
}
constexpr KindKey number_key(std::string_view name) {
  return {name, KeyType::kNumber, std::monostate{}, nullptr};
}
constexpr KindKey number_key(std::string_view name, double fallback) {
  return {name, KeyType::kNumber, fallback, nullptr};
}
constexpr KindKey boolean_key(std::string_view name, bool fallback) {
  return {name, KeyType::kBoolean, fallback, nullptr};
}
constexpr KindKey name_key(std::string_view name) {
  return {name, KeyType::kName, std::string_view(), nullptr};
}
constexpr KindKey choice_key(std::string_view name, std::string_view fallback,
                             std::vector<std::string_view> (*choices)()) {
  return {name, KeyType::kChoice, fallback, choices};
}

// The key of `keys` named `name`, or null.
const KindKey* find_key(std::span<const KindKey> keys, std::string_view name);

// Every key of `keys` that has a default, at its default, in order: a kind's attributes
// before the config sets any.
Attributes default_attributes(std::span<const KindKey> keys);

// The entry of the kind named `type` in a kind table (entries with a `type` member); null
// for a name without one.
template <typename Kind>
const Kind* find_kind(std::span<const Kind> kinds, std::string_view type) {
  for (const Kind& kind : kinds)
    if (kind.type == type) return &kind;
  return nullptr;
}

// The entry of `type`, which must have one: a kind without an entry in a library's table
// is a bug (tests/planner/kinds_test.cpp checks the tables against each other).
template <typename Kind>
const Kind& kind_entry(std::span<const Kind> kinds, std::string_view type) {
  const Kind* kind = find_kind(kinds, type);
  if (kind == nullptr)
    assertion_failed("kind_entry: a kind without a table entry", __FILE__, __LINE__);
  return *kind;
}

// The names of the kinds of a table, in table order.
template <typename Kind>
std::vector<std::string_view> kind_names(std::span<const Kind> kinds) {
  std::vector<std::string_view> out;
  for (const Kind& kind : kinds) out.push_back(kind.type);
  return out;
}

// The keys of every kind, each once, in table order.
template <typename Kind>
std::vector<std::string_view> keys_of_kinds(std::span<const Kind> kinds) {
  std::vector<std::string_view> out;
  for (const Kind& kind : kinds)
    for (const auto& key : kind.keys)
      if (std::find(out.begin(), out.end(), key.name) == out.end()) out.push_back(key.name);
  return out;
}

// Validation's checks, as a kind's rules use them. Paths are full key paths
// ("training.optimizer.eps"); each check reports "path: message" at the path's location.
class RuleChecks {
 public:
  virtual ~RuleChecks() = default;
  // False when the value at `path` failed to load: its rules are then skipped.
  [[nodiscard]] virtual bool ok(const std::string& path) const = 0;
  virtual void error(const std::string& path, const std::string& message) = 0;
  // "must be >= MIN, got ..."; false when the value failed to load or the rule.
  virtual bool at_least(const std::string& path, std::int64_t value, std::int64_t min) = 0;
  // "must be a finite number > 0, got ..." and "... >= 0, got ...".
  virtual void positive(const std::string& path, double value) = 0;
  virtual void non_negative(const std::string& path, double value) = 0;
};

}  // namespace popkit::config
