// Typed fields of a plan file's JSON, each read with its path in every error
// ("<file>: phases[3].ops[2].kind: ..."): the primitives plan_read.cpp builds a Plan from.
// Internal to the planner library.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/attributes.h"
#include "config/kind_keys.h"
#include "planner/json_text.h"
#include "planner/names.h"
#include "planner/plan.h"

namespace popkit::planner {

class FieldReader {
 public:
  using json = nlohmann::json;

  explicit FieldReader(const std::string& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  const std::string& file() const { return file_; }

  const json& field(const json& obj, const std::string& path, const char* key) const;
  static std::string join(const std::string& path, const std::string& key);
  static std::string index(const std::string& path, std::size_t i);

  std::int64_t integer(const json& obj, const std::string& path, const char* key) const;
  // An integer from `lo` to `hi`.
  std::int64_t integer_in(const json& obj, const std::string& path, const char* key,
                          std::int64_t lo, std::int64_t hi) const;
  int small(const json& obj, const std::string& path, const char* key) const;
  int small_or(const json& obj, const std::string& path, const char* key, int fallback) const;
  std::uint64_t bytes(const json& obj, const std::string& path, const char* key) const;
  double number(const json& obj, const std::string& path, const char* key) const;
  // Times, rates and fractions of time: a negative one is a broken file, not a report.
  double non_negative(const json& obj, const std::string& path, const char* key) const;
  bool boolean(const json& obj, const std::string& path, const char* key) const;
  std::string string(const json& obj, const std::string& path, const char* key) const;
  // One of `names`.
  std::string name_in(const json& obj, const std::string& path, const char* key,
                      const std::vector<std::string_view>& names) const;
  template <typename E>
  E enumeration(const json& obj, const std::string& path, const char* key) const {
    return *parse_enum<E>(name_in(obj, path, key, enum_names<E>()));
  }
  const json& array(const json& obj, const std::string& path, const char* key) const;
  std::vector<std::int64_t> shape(const json& obj, const std::string& path, const char* key) const;
  // An op's operand list: tensor indices, -1 for an unused position; absent is empty.
  std::vector<int> operands(const json& obj, const std::string& path, const char* key) const;
  std::vector<std::string> strings(const json& obj, const std::string& path, const char* key) const;
  ReplicaGrouping grouping(const json& obj, const std::string& path, const char* key) const;
  // A kind's keys (config/kind_keys.h), each as its type: every one the kind declares.
  config::Attributes attributes(const json& obj, const std::string& path,
                                std::span<const config::KindKey> keys) const;

  // The array at obj.key, each element read by `read`; from the split when it read it.
  template <typename T, typename Read>
  std::vector<T> list(const json& obj, const std::string& path, const char* key,
                      SplitArrays<T>* split, Read read) const {
    const json& v = field(obj, path, key);
    const std::string p = join(path, key);
    if (split != nullptr && is_placeholder(v)) return split->take(v, p);
    if (!v.is_array()) fail(p, "expected an array");
    std::vector<T> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(read(v[i], index(p, i)));
    return out;
  }

 protected:
  static constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t kMinInt = std::numeric_limits<int>::min();
  static constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

 private:
  const std::string& file_;
};

}  // namespace popkit::planner
