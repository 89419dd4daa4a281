// A YAML document as a plain tree that remembers where every node came from, built from
// yaml-cpp's event parser with guards that plain yaml-cpp lacks: duplicate keys are kept
// (so the loader can report them), aliases are shared and their expansion is bounded
// (no "billion laughs"), nesting depth, input size, UTF-8 and tab indentation are checked.
// Internal to config/yaml/: the rest of popkit sees only Config and Diagnostic.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/diagnostics.h"

namespace popkit::config {

enum class NodeKind { kNull, kScalar, kSequence, kMap };

struct YamlNode;
using YamlNodePtr = std::shared_ptr<const YamlNode>;

struct YamlNode {
  NodeKind kind = NodeKind::kNull;
  Location location;
  std::string value;               // kScalar: the text
  bool plain = true;               // kScalar: unquoted (so `8` is a number and `"8"` a string)
  std::vector<YamlNodePtr> items;  // kSequence
  std::vector<std::pair<YamlNodePtr, YamlNodePtr>> pairs;  // kMap, in source order
};

// Limits that keep loading well under a second on hostile input.
inline constexpr std::size_t kMaxSourceBytes = 1 << 20;
inline constexpr int kMaxDepth = 64;
inline constexpr std::size_t kMaxNodes = 100000;  // counting every alias expansion

// Parses one YAML document. On failure returns nullptr and appends errors. An empty
// document (only comments or whitespace) returns a kNull node.
YamlNodePtr parse_yaml(std::string_view text, const std::string& file,
                       std::vector<Diagnostic>& diagnostics, int line_offset = 0,
                       int column_offset = 0);

// "a mapping", "a sequence", "null", "the string 'x'" ... for messages.
std::string describe(const YamlNode& node);

}  // namespace popkit::config
