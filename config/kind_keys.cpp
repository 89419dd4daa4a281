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
