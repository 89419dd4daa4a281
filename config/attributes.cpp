// A kind's settings (attributes.h).
#include "config/attributes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace popkit::config {

std::strong_ordering Attribute::operator<=>(const Attribute& o) const {
  if (const auto c = key <=> o.key; c != 0) return c;
  if (const auto c = value.index() <=> o.value.index(); c != 0) return c;
  return std::visit(
      [&](const auto& v) -> std::strong_ordering {
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          return std::strong_order(v, std::get<T>(o.value));  // IEEE total order
        } else if constexpr (std::is_same_v<T, bool>) {
          return static_cast<int>(v) <=> static_cast<int>(std::get<T>(o.value));
        } else {
          return v <=> std::get<T>(o.value);
        }
      },
      value);
}

Attributes::Attributes(std::initializer_list<Attribute> items) {
  for (const Attribute& a : items) set(a.key, a.value);
}

void Attributes::set(std::string_view key, AttributeValue value) {
  for (Attribute& a : items_)
    if (a.key == key) {
      a.value = std::move(value);
      return;
    }
  items_.push_back({std::string(key), std::move(value)});
}

const AttributeValue* Attributes::find(std::string_view key) const {
  const auto it =
      std::find_if(items_.begin(), items_.end(), [&](const Attribute& a) { return a.key == key; });
  return it == items_.end() ? nullptr : &it->value;
}

template <typename T>
const T& Attributes::get(std::string_view key) const {
  const AttributeValue* value = find(key);
  POPKIT_ASSERT(value != nullptr && std::holds_alternative<T>(*value));
  return std::get<T>(*value);
}

std::int64_t Attributes::integer(std::string_view key) const {
  return get<std::int64_t>(key);
}
double Attributes::number(std::string_view key) const {
  return get<double>(key);
}
bool Attributes::boolean(std::string_view key) const {
  return get<bool>(key);
}
const std::string& Attributes::name(std::string_view key) const {
  return get<std::string>(key);
}

std::string attribute_text(const AttributeValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>)
          return v;
        else
          return fmt::format("{}", v);
      },
      value);
}

}  // namespace popkit::config
