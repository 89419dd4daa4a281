// `--set` overrides on the YAML tree (overrides.h).
#include "config/yaml/overrides.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <memory>

namespace popkit::config {
namespace {

// Splits `key.path=value`; segments keep their column in the argument for messages.
struct OverrideKey {
  std::string name;
  int column = 1;  // 1-based, in the argument
};

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Returns `node` with the value at keys[k..] replaced by `value`; parents along the path
// are copied, so shared (aliased) nodes elsewhere keep their value.
YamlNodePtr with_override(const YamlNodePtr& node, const std::vector<OverrideKey>& keys,
                          std::size_t k, const YamlNodePtr& value, int line,
                          std::vector<Diagnostic>& diagnostics) {
  if (k == keys.size()) return value;
  const OverrideKey& key = keys[k];
  const Location at{kSetSource, line, key.column};
  std::string parent;
  for (std::size_t i = 0; i < k; ++i) parent += (i ? "." : "") + keys[i].name;
  auto copy = std::make_shared<YamlNode>(node ? *node : YamlNode{});
  if (!node || node->kind == NodeKind::kNull) {
    copy->kind = NodeKind::kMap;
    copy->location = at;
  }
  if (copy->kind == NodeKind::kSequence) {
    if (!is_index(key.name) || std::stoul(key.name) >= copy->items.size()) {
      diagnostics.push_back({Severity::kError, at.file, at.line, at.column,
                             fmt::format("{} is a list of {} items; '{}' is not an index in it",
                                         parent, copy->items.size(), key.name)});
      return nullptr;
    }
    const std::size_t i = std::stoul(key.name);
    auto replaced = with_override(copy->items[i], keys, k + 1, value, line, diagnostics);
    if (!replaced) return nullptr;
    copy->items[i] = replaced;
    return copy;
  }
  if (copy->kind != NodeKind::kMap) {
    diagnostics.push_back({Severity::kError, at.file, at.line, at.column,
                           fmt::format("{} is {}, not a mapping, so it has no key '{}'", parent,
                                       describe(*copy), key.name)});
    return nullptr;
  }
  for (auto& [k_node, v_node] : copy->pairs) {
    if (k_node->kind == NodeKind::kScalar && k_node->value == key.name) {
      auto replaced = with_override(v_node, keys, k + 1, value, line, diagnostics);
      if (!replaced) return nullptr;
      v_node = replaced;
      return copy;
    }
  }
  auto new_key = std::make_shared<YamlNode>();
  new_key->kind = NodeKind::kScalar;
  new_key->value = key.name;
  new_key->location = at;
  auto replaced = with_override(nullptr, keys, k + 1, value, line, diagnostics);
  if (!replaced) return nullptr;
  copy->pairs.emplace_back(new_key, replaced);
  return copy;
}

// The value of `name` in map `node`, or nullptr.
YamlNodePtr value_of(const YamlNodePtr& node, const std::string& name) {
  if (!node || node->kind != NodeKind::kMap) return nullptr;
  for (const auto& [k_node, v_node] : node->pairs)
    if (k_node->kind == NodeKind::kScalar && k_node->value == name) return v_node;
  return nullptr;
}

// --set training.steps=N replaces the file's run length, as poprun's --steps does:
// the file's training.epochs goes (and --set training.epochs the file's steps), where
// both would be refused ("give training.epochs or training.steps, not both"). Two --set
// arguments that give both are still refused.
YamlNodePtr without_other_run_length(const YamlNodePtr& root,
                                     const std::vector<OverrideKey>& keys) {
  if (keys.size() != 2 || keys[0].name != "training" ||
      (keys[1].name != "steps" && keys[1].name != "epochs"))
    return root;
  const std::string other = keys[1].name == "steps" ? "epochs" : "steps";
  const YamlNodePtr training = value_of(root, "training");
  const YamlNodePtr given = value_of(training, other);
  if (!given || given->location.file == kSetSource) return root;
  auto lean = std::make_shared<YamlNode>(*training);
  std::erase_if(lean->pairs, [&](const auto& pair) {
    return pair.first->kind == NodeKind::kScalar && pair.first->value == other;
  });
  auto copy = std::make_shared<YamlNode>(*root);
  for (auto& [k_node, v_node] : copy->pairs)
    if (k_node->kind == NodeKind::kScalar && k_node->value == "training") v_node = lean;
  return copy;
}

}  // namespace

YamlNodePtr apply_override(const YamlNodePtr& root, const std::string& argument, int line,
                           std::vector<Diagnostic>& diagnostics) {
  const std::size_t eq = argument.find('=');
  if (eq == std::string::npos || eq == 0) {
    diagnostics.push_back({Severity::kError, kSetSource, line, 1,
                           fmt::format("expected key.path=value, got '{}'", argument)});
    return root;
  }
  std::vector<OverrideKey> keys;
  std::size_t start = 0;
  while (start <= eq) {
    std::size_t dot = argument.find('.', start);
    if (dot == std::string::npos || dot > eq) dot = eq;
    const std::string name = argument.substr(start, dot - start);
    if (name.empty()) {
      diagnostics.push_back({Severity::kError, kSetSource, line, static_cast<int>(start) + 1,
                             "empty key in the path; write keys separated by single dots"});
      return root;
    }
    keys.push_back({name, static_cast<int>(start) + 1});
    start = dot + 1;
  }
  const std::size_t n_before = diagnostics.size();
  YamlNodePtr value = parse_yaml(std::string_view(argument).substr(eq + 1), kSetSource, diagnostics,
                                 line - 1, static_cast<int>(eq) + 1);
  if (!value || diagnostics.size() != n_before) return root;
  if (value->kind == NodeKind::kNull)
    value = [&] {
      auto empty = std::make_shared<YamlNode>(*value);
      empty->location = {kSetSource, line, static_cast<int>(eq) + 2};
      return YamlNodePtr(empty);
    }();
  auto updated = with_override(root, keys, 0, value, line, diagnostics);
  return updated ? without_other_run_length(updated, keys) : root;
}

std::int64_t file_factor(const YamlNode& root) {
  auto child = [](const YamlNode* map, std::string_view key) -> const YamlNode* {
    if (!map || map->kind != NodeKind::kMap) return nullptr;
    for (const auto& [k, v] : map->pairs)
      if (k->kind == NodeKind::kScalar && k->value == key) return v.get();
    return nullptr;
  };
  const YamlNode* factor = child(child(&root, "replication"), "factor");
  std::int64_t value = 1;
  if (factor && factor->kind == NodeKind::kScalar)
    std::from_chars(factor->value.data(), factor->value.data() + factor->value.size(), value);
  return value;
}

void warn_stale_groupings(const Config& config, std::int64_t factor_in_file,
                          const Locations& locations, std::vector<Diagnostic>& diagnostics) {
  const std::int64_t factor = config.replication.factor;
  if (factor == factor_in_file) return;
  for (const Grouping& g : config.replication.groupings) {
    if (g.all_replicas || g.stride != 1 || g.group_size < 1 || factor < 1 ||
        g.group_size != factor_in_file || factor % g.group_size != 0)
      continue;
    const std::string path = "replication.groupings." + g.name + ".group_size";
    const Location at = locations.find(path);
    if (at.file == kSetSource) continue;  // the user set this size along with the factor
    diagnostics.push_back(
        {Severity::kWarning, at.file, at.line, at.column,
         fmt::format("{}: {} was all the replicas of the file's replication.factor {}, but "
                     "--set makes the factor {}, so '{}' is now {} groups of {}; write "
                     "`group_size: all` to follow the factor, or add --set {}={}",
                     path, g.group_size, factor_in_file, factor, g.name, factor / g.group_size,
                     g.group_size, path, factor)});
  }
}

}  // namespace popkit::config
