// The loader's readers of the YAML tree (config/yaml/load.cpp): Decoder reads a scalar as
// an integer, number, boolean, string, enum or size with YAML 1.2 core-schema typing, and
// MapReader reads one mapping of a known section, reporting unknown and duplicate keys.
// Every problem becomes a diagnostic at the node, and the key path is poisoned.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/suggest.h"
#include "base/units.h"
#include "config/diagnostics.h"
#include "config/names.h"
#include "config/validate.h"
#include "config/yaml/keys.h"
#include "config/yaml/yaml_tree.h"

namespace popkit::config {

inline std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// Reads scalars with YAML 1.2 core-schema typing: a quoted scalar is always a string.
class Decoder {
 public:
  Decoder(std::vector<Diagnostic>& diagnostics, Locations& locations)
      : diagnostics_(diagnostics), locations_(locations) {}

  void report(Severity severity, const Location& at, std::string message) {
    diagnostics_.push_back({severity, at.file, at.line, at.column, std::move(message)});
  }
  void error(const Location& at, std::string message) {
    report(Severity::kError, at, std::move(message));
  }
  // An error about the value at `path`; rules over that path are then skipped.
  void bad(const YamlNode& node, const std::string& path, std::string message) {
    error(node.location, fmt::format("{}: {}", path, message));
    locations_.poison(path);
  }

  Locations& locations() { return locations_; }

  bool integer(const YamlNode& node, const std::string& path, std::int64_t& out) {
    return parse_integer(node, path, out, "a 64-bit integer");
  }

  bool unsigned_integer(const YamlNode& node, const std::string& path, std::uint64_t& out) {
    if (node.kind == NodeKind::kScalar && node.plain && !node.value.empty() &&
        node.value[0] == '-' && is_plain_number(node)) {
      bad(node, path, fmt::format("must be >= 0, got {}", node.value));
      return false;
    }
    return parse_integer(node, path, out, "a 64-bit unsigned integer");
  }

  // A plain decimal integer, an optional '+' first; `type` names T in the range error.
  template <typename T>
  bool parse_integer(const YamlNode& node, const std::string& path, T& out, const char* type) {
    if (!is_plain_number(node)) return expected(node, path, "an integer");
    const std::string& v = node.value;
    const char* first = v.data() + (v[0] == '+' ? 1 : 0);
    const auto [end, ec] = std::from_chars(first, v.data() + v.size(), out);
    if (ec == std::errc::result_out_of_range) {
      bad(node, path, fmt::format("{} does not fit in {}", v, type));
      return false;
    }
    if (ec != std::errc() || end != v.data() + v.size()) return expected(node, path, "an integer");
    return true;
  }

  bool number(const YamlNode& node, const std::string& path, double& out) {
    if (node.kind != NodeKind::kScalar || !node.plain) return expected(node, path, "a number");
    std::string v = node.value;
    if (!v.empty() && v[0] == '+') v.erase(0, 1);
    const bool negative = !v.empty() && v[0] == '-';
    const std::string body = negative ? v.substr(1) : v;
    if (body == ".inf" || body == ".Inf" || body == ".INF") {
      out = negative ? -HUGE_VAL : HUGE_VAL;
      return true;
    }
    if (body == ".nan" || body == ".NaN" || body == ".NAN") {
      out = std::nan("");
      return true;
    }
    if (body.empty() || !(std::isdigit(static_cast<unsigned char>(body[0])) || body[0] == '.')) {
      return expected(node, path, "a number");
    }
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec == std::errc::result_out_of_range) {
      bad(node, path, fmt::format("{} is out of the range of a double", node.value));
      return false;
    }
    if (ec != std::errc() || end != v.data() + v.size()) return expected(node, path, "a number");
    return true;
  }

  bool boolean(const YamlNode& node, const std::string& path, bool& out) {
    if (node.kind == NodeKind::kScalar && node.plain) {
      const std::string& v = node.value;
      if (v == "true" || v == "True" || v == "TRUE") {
        out = true;
        return true;
      }
      if (v == "false" || v == "False" || v == "FALSE") {
        out = false;
        return true;
      }
      if (v == "yes" || v == "no" || v == "on" || v == "off" || v == "Yes" || v == "No" ||
          v == "On" || v == "Off" || v == "y" || v == "n") {
        bad(node, path,
            fmt::format("expected true or false, got '{}' (YAML 1.2 reads yes/no/on/off as "
                        "strings)",
                        v));
        return false;
      }
    }
    return expected(node, path, "true or false");
  }

  bool string(const YamlNode& node, const std::string& path, std::string& out) {
    if (node.kind != NodeKind::kScalar) return expected(node, path, "a string");
    out = node.value;
    return true;
  }

  // One of `names`; "did you mean" and the list of names otherwise.
  bool choice(const YamlNode& node, const std::string& path,
              const std::vector<std::string_view>& names, std::string& out) {
    const std::vector<std::string> all(names.begin(), names.end());
    if (node.kind != NodeKind::kScalar) {
      return expected(node, path, fmt::format("one of {}", join(all)));
    }
    if (std::find(all.begin(), all.end(), node.value) != all.end()) {
      out = node.value;
      return true;
    }
    bad(node, path,
        fmt::format("unknown value '{}'{} (one of {})", node.value, did_you_mean(node.value, all),
                    join(all)));
    return false;
  }

  // One of the names of `choices`, as its value.
  template <typename E>
  bool choice(const YamlNode& node, const std::string& path, NameTable<E> choices, E& out) {
    std::string name;
    if (!choice(node, path, names_in(choices), name)) return false;
    out = *parse_in(choices, name);
    return true;
  }

  // A value of one of the config's enums, by the names of config/names.h.
  template <typename E>
  bool choice(const YamlNode& node, const std::string& path, E& out) {
    return choice(node, path, name_table(E{}), out);
  }

  bool bytes(const YamlNode& node, const std::string& path, std::uint64_t& out) {
    if (node.kind != NodeKind::kScalar) {
      return expected(node, path, "a size in bytes, e.g. 900MiB");
    }
    std::string why;
    const auto value = parse_bytes(node.value, why);
    if (!value) {
      bad(node, path, why);
      return false;
    }
    out = *value;
    return true;
  }

 private:
  static bool is_plain_number(const YamlNode& node) {
    if (node.kind != NodeKind::kScalar || !node.plain || node.value.empty()) return false;
    std::size_t i = node.value[0] == '-' || node.value[0] == '+' ? 1 : 0;
    if (i == node.value.size()) return false;
    for (; i < node.value.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(node.value[i]))) return false;
    }
    return true;
  }

  bool expected(const YamlNode& node, const std::string& path, const std::string& what) {
    bad(node, path, fmt::format("expected {}, got {}", what, describe(node)));
    return false;
  }

  std::vector<Diagnostic>& diagnostics_;
  Locations& locations_;
};

// One mapping of a known section: reports unknown and duplicate keys once, records
// where every key was written, and hands out values by key.
class MapReader {
 public:
  // `node` may be null (section absent: all defaults) or a YAML null (`sharding:`
  // written with nothing under it: present, all defaults).
  MapReader(Decoder& decoder, const YamlNode* node, std::string path, std::string_view section,
            bool null_is_empty = false)
      : decoder_(decoder), path_(std::move(path)), keys_(section_keys(section)) {
    if (!node || (node->kind == NodeKind::kNull && null_is_empty)) return;
    if (node->kind != NodeKind::kMap) {
      decoder_.bad(
          *node, path_.empty() ? "config" : path_,
          fmt::format("expected a mapping{}, got {}",
                      path_.empty() ? " of sections (version, model, ...)" : "", describe(*node)));
      return;
    }
    for (const auto& [key, value] : node->pairs) {
      if (key->kind != NodeKind::kScalar) {
        decoder_.error(key->location,
                       fmt::format("{}keys must be names, got {}",
                                   path_.empty() ? "" : path_ + ": ", describe(*key)));
        continue;
      }
      if (std::find(keys_.begin(), keys_.end(), key->value) == keys_.end()) {
        const std::string hint = did_you_mean(key->value, keys_);
        decoder_.error(
            key->location,
            fmt::format("{}unknown key '{}'{}", where(), key->value,
                        hint.empty() ? fmt::format(" (known keys: {})", join(keys_)) : hint));
        continue;
      }
      const std::string& name = key->value;
      const auto first = std::find_if(entries_.begin(), entries_.end(),
                                      [&](const auto& e) { return e.first->value == name; });
      if (first != entries_.end()) {
        decoder_.error(key->location, fmt::format("{}: duplicate key; it is already set at line {}",
                                                  child(key->value), first->first->location.line));
        decoder_.report(Severity::kNote, first->first->location,
                        fmt::format("{} first set here", child(key->value)));
        decoder_.locations().poison(child(key->value));
        continue;
      }
      entries_.emplace_back(key.get(), value.get());
    }
  }

  // The value of `key`, or null when absent. The key must be one of the section's.
  const YamlNode* get(std::string_view key) {
    POPKIT_ASSERT(std::find(keys_.begin(), keys_.end(), key) != keys_.end());
    for (const auto& [k, v] : entries_) {
      if (k->value == key) {
        // Collections are pointed at by their key, scalars by their value.
        const bool collection = v->kind == NodeKind::kMap || v->kind == NodeKind::kSequence;
        decoder_.locations().set(child(key), collection ? k->location : v->location);
        return v;
      }
    }
    return nullptr;
  }

  const YamlNode* require(std::string_view key, const Location& fallback) {
    const YamlNode* node = get(key);
    if (!node) {
      decoder_.error(fallback, fmt::format("{}: required key is missing", child(key)));
      decoder_.locations().poison(child(key));
    }
    return node;
  }

  std::string child(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }

 private:
  std::string where() const { return path_.empty() ? "" : path_ + ": "; }

  Decoder& decoder_;
  std::string path_;
  const std::vector<std::string>& keys_;
  std::vector<std::pair<const YamlNode*, const YamlNode*>> entries_;
};

}  // namespace popkit::config
