// A kind's keys as a kind table (config/layer_kinds.h, config/optimizer_kinds.h) lists
// them: each key names the member of the config struct it fills, so generic code (the
// YAML reader, the key table, plan files, the resolved config) reads and writes a
// kind's keys from its table entry without knowing the kind. RuleChecks is what a
// kind's rules ask of validation (config/validate.cpp implements it); kind_entry finds
// a kind's entry in any library's kind table.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.h"
#include "config/config.h"

namespace popkit::config {

// The member a key fills, by its type (the type decides how it is read and written).
template <typename S>
using KeyMember =
    std::variant<std::int64_t S::*, double S::*, bool S::*, Activation S::*, DType S::*>;

template <typename S>
struct KindKey {
  std::string_view name;
  KeyMember<S> member;
  bool required = false;  // the loader reports it missing when the kind is chosen
};

// The entry of `type` in a kind table (an array of entries with a `type` member, one
// per enum value); a type without one is a bug.
template <typename Kind, std::size_t N, typename Type>
const Kind& kind_entry(const std::array<Kind, N>& kinds, Type type) {
  for (const Kind& kind : kinds)
    if (kind.type == type) return kind;
  assertion_failed("kind_entry: a kind without a table entry", __FILE__, __LINE__);
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
  // "must be a finite number > 0, got ..." and "... >= 0, got ...".
  virtual void positive(const std::string& path, double value) = 0;
  virtual void non_negative(const std::string& path, double value) = 0;
};

}  // namespace popkit::config
