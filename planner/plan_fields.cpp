// The typed field readers of plan_fields.h: every error names the file and the field's path,
// and quotes a value cut to one line.
#include "planner/plan_fields.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/error.h"

namespace popkit::planner {
namespace {

using nlohmann::json;

// Values quoted in an error message are cut to this many bytes, so a message stays a line.
constexpr std::size_t kMaxShown = 40;

std::string clipped(const std::string& s) {
  return s.size() <= kMaxShown ? s : s.substr(0, kMaxShown) + "...";
}

// A value as an error message shows it: scalars as JSON (a long string cut short),
// arrays and objects by their type only.
std::string shown(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_string() && v.get_ref<const std::string&>().size() > kMaxShown) {
    return json(v.get_ref<const std::string&>().substr(0, kMaxShown))
               .dump(-1, ' ', false, json::error_handler_t::replace) +
           "...";
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

void FieldReader::fail(const std::string& path, const std::string& what) const {
  throw Error("{}: {}: {}", file_, path, what);
}

const nlohmann::json& FieldReader::field(const json& obj, const std::string& path,
                                         const char* key) const {
  if (!obj.is_object()) fail(path, "expected an object");
  const auto it = obj.find(key);
  if (it == obj.end()) fail(join(path, key), "missing");
  return *it;
}

std::string FieldReader::join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}
std::string FieldReader::index(const std::string& path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

std::int64_t FieldReader::integer(const json& obj, const std::string& path, const char* key) const {
  const json& v = field(obj, path, key);
  if (!v.is_number_integer())
    fail(join(path, key), fmt::format("expected an integer, got {}", shown(v)));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxInt64))
    fail(join(path, key), fmt::format("{} is out of range (at most {})", shown(v), kMaxInt64));
  return v.get<std::int64_t>();
}
std::int64_t FieldReader::integer_in(const json& obj, const std::string& path, const char* key,
                                     std::int64_t lo, std::int64_t hi) const {
  const std::int64_t v = integer(obj, path, key);
  if (v < lo || v > hi)
    fail(join(path, key), fmt::format("{} is out of range ({} to {})", v, lo, hi));
  return v;
}
int FieldReader::small(const json& obj, const std::string& path, const char* key) const {
  return static_cast<int>(integer_in(obj, path, key, kMinInt, kMaxInt));
}
int FieldReader::small_or(const json& obj, const std::string& path, const char* key,
                          int fallback) const {
  return obj.contains(key) ? small(obj, path, key) : fallback;
}
std::uint64_t FieldReader::bytes(const json& obj, const std::string& path, const char* key) const {
  const json& v = field(obj, path, key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    fail(join(path, key), fmt::format("expected a non-negative integer, got {}", shown(v)));
  return v.get<std::uint64_t>();
}
double FieldReader::number(const json& obj, const std::string& path, const char* key) const {
  const json& v = field(obj, path, key);
  if (!v.is_number()) fail(join(path, key), fmt::format("expected a number, got {}", shown(v)));
  return v.get<double>();
}
double FieldReader::non_negative(const json& obj, const std::string& path, const char* key) const {
  const double v = number(obj, path, key);
  if (v < 0) fail(join(path, key), fmt::format("{} is negative; a time or a rate is >= 0", v));
  if (v > kMaxTimeOrRate)
    fail(join(path, key),
         fmt::format("{} is past any time or rate (at most {})", v, kMaxTimeOrRate));
  return v;
}
bool FieldReader::boolean(const json& obj, const std::string& path, const char* key) const {
  const json& v = field(obj, path, key);
  if (!v.is_boolean())
    fail(join(path, key), fmt::format("expected true or false, got {}", shown(v)));
  return v.get<bool>();
}
std::string FieldReader::string(const json& obj, const std::string& path, const char* key) const {
  const json& v = field(obj, path, key);
  if (!v.is_string()) fail(join(path, key), fmt::format("expected a string, got {}", shown(v)));
  return v.get<std::string>();
}
std::string FieldReader::name_in(const json& obj, const std::string& path, const char* key,
                                 const std::vector<std::string_view>& names) const {
  std::string s = string(obj, path, key);
  if (std::find(names.begin(), names.end(), s) == names.end())
    fail(join(path, key), fmt::format("'{}' is not one of {}", clipped(s), fmt::join(names, ", ")));
  return s;
}
const nlohmann::json& FieldReader::array(const json& obj, const std::string& path,
                                         const char* key) const {
  const json& v = field(obj, path, key);
  if (!v.is_array()) fail(join(path, key), "expected an array");
  return v;
}
std::vector<std::int64_t> FieldReader::shape(const json& obj, const std::string& path,
                                             const char* key) const {
  std::vector<std::int64_t> out;
  const json& a = array(obj, path, key);
  const std::string p = join(path, key);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number_integer()) fail(index(p, i), "expected an integer");
    if (a[i].is_number_unsigned() &&
        a[i].get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxInt64))
      fail(index(p, i), fmt::format("{} is out of range (at most {})", shown(a[i]), kMaxInt64));
    out.push_back(a[i].get<std::int64_t>());
  }
  return out;
}
std::vector<int> FieldReader::operands(const json& obj, const std::string& path,
                                       const char* key) const {
  std::vector<int> out;
  if (!obj.contains(key)) return out;
  const json& a = array(obj, path, key);
  const std::string p = join(path, key);
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number_integer())
      fail(index(p, i), fmt::format("expected a tensor index, got {}", shown(a[i])));
    const bool in_range =
        a[i].is_number_unsigned()
            ? a[i].get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxInt)
            : a[i].get<std::int64_t>() >= -1 && a[i].get<std::int64_t>() <= kMaxInt;
    if (!in_range)
      fail(index(p, i), fmt::format("{} is not a tensor index (-1 to {})", shown(a[i]), kMaxInt));
    out.push_back(a[i].get<int>());
  }
  return out;
}
std::vector<std::string> FieldReader::strings(const json& obj, const std::string& path,
                                              const char* key) const {
  std::vector<std::string> out;
  const json& a = array(obj, path, key);
  const std::string p = join(path, key);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) fail(index(p, i), "expected a string");
    out.push_back(a[i].get<std::string>());
  }
  return out;
}
ReplicaGrouping FieldReader::grouping(const json& obj, const std::string& path,
                                      const char* key) const {
  const json& g = field(obj, path, key);
  const std::string p = join(path, key);
  return {integer(g, p, "factor"), integer(g, p, "group_size"), integer(g, p, "stride")};
}

config::Attributes FieldReader::attributes(const json& obj, const std::string& path,
                                           std::span<const config::KindKey> keys) const {
  config::Attributes out;
  for (const config::KindKey& key : keys) {
    const std::string name(key.name);
    switch (key.type) {
      case config::KeyType::kInteger:
        out.set(name, integer(obj, path, name.c_str()));
        break;
      case config::KeyType::kNumber:
        out.set(name, number(obj, path, name.c_str()));
        break;
      case config::KeyType::kBoolean:
        out.set(name, boolean(obj, path, name.c_str()));
        break;
      case config::KeyType::kChoice:
        out.set(name, name_in(obj, path, name.c_str(), key.choices()));
        break;
      case config::KeyType::kName:
        out.set(name, string(obj, path, name.c_str()));
        break;
    }
  }
  return out;
}

}  // namespace popkit::planner
