// A kind's settings: the values of the keys a layer or optimizer kind declares
// (config/kind_keys.h), in the kind's order. A config holds one Attributes per layer and
// one for the optimizer; the planner copies a layer's into the plan, so plan files, the
// engine's kernels and the builder's sharing key all read the same values. Generic code
// walks them through the kind's key table; a kind's own code asks for a key by name:
//
//   layer.attributes.integer("out_features")          // 512
//   layer.attributes.choice<Activation>("activation")  // Activation::kGelu
//
// Asking for a key the kind does not declare, or as another type, is a bug (an assertion):
// validation has made sure every key a kind reads is there.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.h"
#include "base/names.h"

namespace popkit::config {

// A choice is held by its name ("gelu"), as files write it.
using AttributeValue = std::variant<std::int64_t, double, bool, std::string>;

struct Attribute {
  std::string key;
  AttributeValue value;

  bool operator==(const Attribute&) const = default;
  // Total over every value, NaN included (the sharing key orders layers by attributes).
  std::strong_ordering operator<=>(const Attribute& o) const;
};

class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<Attribute> items);

  // Sets `key`, in place when present, else after the others.
  void set(std::string_view key, AttributeValue value);
  [[nodiscard]] const AttributeValue* find(std::string_view key) const;

  [[nodiscard]] std::int64_t integer(std::string_view key) const;
  [[nodiscard]] double number(std::string_view key) const;
  [[nodiscard]] bool boolean(std::string_view key) const;
  [[nodiscard]] const std::string& name(std::string_view key) const;
  // A choice as a value of enum E, by E's name table (base/names.h; the caller includes
  // the header declaring it, config/names.h for the config's enums).
  template <typename E>
  [[nodiscard]] E choice(std::string_view key) const {
    const std::optional<E> value = parse_enum<E>(name(key));
    POPKIT_ASSERT(value.has_value());
    return *value;
  }

  [[nodiscard]] const std::vector<Attribute>& items() const { return items_; }
  [[nodiscard]] bool empty() const { return items_.empty(); }

  bool operator==(const Attributes&) const = default;
  std::strong_ordering operator<=>(const Attributes&) const = default;

 private:
  template <typename T>
  const T& get(std::string_view key) const;

  std::vector<Attribute> items_;
};

// A value as messages and printouts show it: 512, 0.25, true, gelu.
std::string attribute_text(const AttributeValue& value);

}  // namespace popkit::config
