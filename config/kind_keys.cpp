// A kind's keys (kind_keys.h).
#include "config/kind_keys.h"

namespace popkit::config {

AttributeValue KindKey::default_value() const {
  return std::visit(
      [](const auto& v) -> AttributeValue {
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          assertion_failed("KindKey::default_value: a required key has no default", __FILE__,
                           __LINE__);
        } else if constexpr (std::is_same_v<T, std::string_view>) {
          return std::string(v);
        } else {
          return v;
        }
      },
      fallback);
}

bool KindKey::accepts(const AttributeValue& value) const {
  switch (type) {
    case KeyType::kInteger:
      return std::holds_alternative<std::int64_t>(value);
    case KeyType::kNumber:
      return std::holds_alternative<double>(value);
    case KeyType::kBoolean:
      return std::holds_alternative<bool>(value);
    case KeyType::kName:
      return std::holds_alternative<std::string>(value);
    case KeyType::kChoice: {
      const auto* chosen = std::get_if<std::string>(&value);
      const std::vector<std::string_view> names = choices();
      return chosen != nullptr && std::find(names.begin(), names.end(), *chosen) != names.end();
    }
  }
  return false;
}

const KindKey* find_key(std::span<const KindKey> keys, std::string_view name) {
  for (const KindKey& key : keys)
    if (key.name == name) return &key;
  return nullptr;
}

Attributes default_attributes(std::span<const KindKey> keys) {
  Attributes out;
  for (const KindKey& key : keys)
    if (!key.required()) out.set(key.name, key.default_value());
  return out;
}

}  // namespace popkit::config
