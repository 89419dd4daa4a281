// Settings applied to a config's text at the marks of its YAML tree; see edit.h.
#include "config/yaml/edit.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "base/error.h"
#include "base/input_file.h"
#include "base/output_file.h"
#include "config/yaml/keys.h"
#include "config/yaml/load.h"
#include "config/yaml/yaml_tree.h"

namespace popkit::config {
namespace {

// What a setting could not do, with the setting for the message.
struct EditError {
  std::string message;
};

// One map on the path to the edited key: the map node and the pair the path takes.
struct Step {
  const YamlNode* map = nullptr;
  std::size_t pair = 0;
};

bool is_blank_or_comment(std::string_view line) {
  const std::size_t i = line.find_first_not_of(" \t\r");
  return i == std::string_view::npos || line[i] == '#';
}

// The text of one config, with offsets for the tree's marks. The tree is parsed again
// after every edit, so marks never go stale.
class Editor {
 public:
  Editor(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  [[nodiscard]] const std::string& text() const { return text_; }

  // Applies `key.path=value`; returns whether the text changed.
  bool apply(const std::string& setting) {
    const std::size_t eq = setting.find('=');
    if (eq == std::string::npos || eq == 0) throw EditError{"expected key.path=value"};
    std::vector<std::string> keys;
    for (std::size_t start = 0; start <= eq;) {
      std::size_t dot = setting.find('.', start);
      if (dot == std::string::npos || dot > eq) dot = eq;
      keys.push_back(setting.substr(start, dot - start));
      if (keys.back().empty()) throw EditError{"empty key in the path"};
      start = dot + 1;
    }
    const std::string value = setting.substr(eq + 1);
    std::vector<Diagnostic> diagnostics;
    const YamlNodePtr parsed = parse_yaml(value, "--set", diagnostics);
    if (!parsed || has_errors(diagnostics) || parsed->kind == NodeKind::kNull)
      throw EditError{"the value is not one YAML flow value"};

    reparse();
    const YamlNode* node = root_.get();
    std::vector<Step> path;
    std::size_t i = 0;
    for (; i < keys.size() && node->kind == NodeKind::kMap; ++i) {
      const auto& pairs = node->pairs;
      std::size_t j = 0;
      while (j < pairs.size() &&
             !(pairs[j].first->kind == NodeKind::kScalar && pairs[j].first->value == keys[i]))
        ++j;
      if (j == pairs.size()) break;
      path.push_back({node, j});
      node = pairs[j].second.get();
    }
    if (i == keys.size()) return replace(path, *node, value);
    const std::vector<std::string> rest(keys.begin() + static_cast<std::ptrdiff_t>(i), keys.end());
    if (node->kind == NodeKind::kMap) {
      insert(path, *node, join(keys, i), rest, value);
      return true;
    }
    if (node->kind == NodeKind::kNull) return replace(path, *node, flow_nest(rest, value));
    throw EditError{fmt::format("{} is {}, not a mapping", join(keys, i), describe(*node))};
  }

 private:
  void reparse() {
    std::vector<Diagnostic> diagnostics;
    root_ = parse_yaml(text_, file_, diagnostics);
    if (!root_ || has_errors(diagnostics)) throw EditError{"the text does not parse as YAML"};
    if (root_->kind != NodeKind::kMap) throw EditError{"the config is not a mapping"};
    bom_ = text_.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
    line_starts_ = {0};
    for (std::size_t k = 0; k < text_.size(); ++k)
      if (text_[k] == '\n') line_starts_.push_back(k + 1);
  }

  static std::string join(const std::vector<std::string>& keys, std::size_t n) {
    std::string out;
    for (std::size_t k = 0; k < n; ++k) out += (k ? "." : "") + keys[k];
    return out;
  }

  // {a: {b: value}} for the keys a, b.
  static std::string flow_nest(const std::vector<std::string>& keys, const std::string& value) {
    std::string out = value;
    for (auto k = keys.rbegin(); k != keys.rend(); ++k) out = fmt::format("{{{}: {}}}", *k, out);
    return out;
  }

  std::size_t offset(const Location& at) const {
    return line_starts_.at(static_cast<std::size_t>(at.line - 1)) +
           static_cast<std::size_t>(at.column - 1) + (at.line == 1 ? bom_ : 0);
  }
  std::size_t line_start(std::size_t pos) const {
    const std::size_t nl = text_.rfind('\n', pos == 0 ? 0 : pos - 1);
    return pos == 0 || nl == std::string::npos ? 0 : nl + 1;
  }
  std::size_t line_end(std::size_t pos) const {
    const std::size_t nl = text_.find('\n', pos);
    return nl == std::string::npos ? text_.size() : nl;
  }

  static bool is_flow(char c) { return c == '{' || c == '['; }

  // Where a scalar, null or flow collection ends (one past its last byte).
  std::size_t span_end(const YamlNode& n, std::size_t start) const {
    if (n.kind == NodeKind::kNull) {
      for (const std::string_view word : {"~", "null", "Null", "NULL"})
        if (text_.compare(start, word.size(), word) == 0) return start + word.size();
      return start;  // `key:` with nothing after it
    }
    if (n.kind == NodeKind::kScalar) {
      if (n.plain) {
        if (text_.compare(start, n.value.size(), n.value) != 0)
          throw EditError{
              fmt::format("the scalar at line {} spans lines; edit it by hand", n.location.line)};
        return start + n.value.size();
      }
      const char quote = text_[start];
      if (quote != '"' && quote != '\'')
        throw EditError{
            fmt::format("the block scalar at line {} cannot be edited as text", n.location.line)};
      for (std::size_t k = start + 1; k < text_.size(); ++k) {
        if (quote == '"' && text_[k] == '\\') {
          ++k;
        } else if (text_[k] == quote) {
          if (quote == '\'' && k + 1 < text_.size() && text_[k + 1] == '\'') {
            ++k;  // '' is an escaped quote
          } else {
            return k + 1;
          }
        }
      }
      throw EditError{"an unclosed quote"};
    }
    // A flow collection: to its matching bracket, past quoted strings and comments.
    int depth = 0;
    for (std::size_t k = start; k < text_.size(); ++k) {
      const char c = text_[k];
      if (c == '"' || c == '\'') {
        const char q = c;
        for (++k; k < text_.size() && text_[k] != q; ++k)
          if (q == '"' && text_[k] == '\\') ++k;
      } else if (c == '#' && k > 0 && (text_[k - 1] == ' ' || text_[k - 1] == '\t')) {
        k = line_end(k);
      } else if (is_flow(c)) {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return k + 1;
      }
    }
    throw EditError{"an unclosed flow collection"};
  }

  // The first byte that is not part of the value of path.back()'s pair: the line of the
  // next key of its map, or where that map ends; the end of the text for the root.
  std::size_t limit(const std::vector<Step>& path, std::size_t depth) const {
    const Step& s = path[depth];
    if (s.pair + 1 < s.map->pairs.size())
      return line_start(offset(s.map->pairs[s.pair + 1].first->location));
    return depth == 0 ? text_.size() : limit(path, depth - 1);
  }

  // The end of the last line with content (not blank, not only a comment) before `limit`.
  std::size_t content_end(std::size_t from, std::size_t limit) const {
    std::size_t end = line_end(from);
    for (std::size_t pos = line_start(from); pos < limit && pos < text_.size();) {
      const std::size_t e = line_end(pos);
      if (!is_blank_or_comment(std::string_view(text_).substr(pos, e - pos))) end = e;
      pos = e + 1;
    }
    return end;
  }

  bool replace(const std::vector<Step>& path, const YamlNode& node, const std::string& value) {
    std::size_t start = offset(node.location);
    std::size_t end = 0;
    std::string with = value;
    const bool block =
        (node.kind == NodeKind::kMap || node.kind == NodeKind::kSequence) && !is_flow(text_[start]);
    if (block) {
      // From just after the key's colon to the last line of the block.
      const YamlNode& key = *path.back().map->pairs[path.back().pair].first;
      const std::size_t colon = text_.find(':', span_end(key, offset(key.location)));
      end = content_end(start, limit(path, path.size() - 1));
      start = colon + 1;
      with = " " + value;
    } else {
      end = span_end(node, start);
      if (text_.compare(start, end - start, value) == 0) return false;
      if (start == end && start > 0 && text_[start - 1] == ':') with = " " + value;
      // A comment after the value keeps its column where the spaces before it allow.
      const std::size_t gap = text_.find_first_not_of(' ', end);
      if (gap != std::string::npos && gap > end && text_[gap] == '#') {
        const std::size_t spaces = gap - end;
        const std::size_t width = end - start;
        const std::size_t keep = width + spaces > with.size()
                                     ? std::max<std::size_t>(1, width + spaces - with.size())
                                     : 1;
        end = gap;
        with += std::string(keep, ' ');
      }
    }
    text_.replace(start, end - start, with);
    return true;
  }

  // The schema order of the keys of the map at `map_path` ("replication.groupings.g"
  // is a "replication.groupings.*"); empty when the schema does not order them.
  static std::vector<std::string> schema_keys(const std::string& map_path) {
    const std::size_t dot = map_path.rfind('.');
    const std::string named = dot == std::string::npos ? "" : map_path.substr(0, dot) + ".*";
    for (const Section& s : sections())
      if (s.path == map_path || (!named.empty() && s.path == named)) return s.keys;
    return {};
  }

  void insert(const std::vector<Step>& path, const YamlNode& map, const std::string& map_path,
              const std::vector<std::string>& keys, const std::string& value) {
    const std::vector<std::string> order = schema_keys(map_path);
    const auto rank = [&](const std::string& k) {
      const auto it = std::find(order.begin(), order.end(), k);
      return it == order.end() ? order.size() : static_cast<std::size_t>(it - order.begin());
    };
    // After the pair the new key follows in schema order (else the last pair), or before
    // the first pair when every key there comes after it.
    const std::size_t mine = rank(keys.front());
    std::optional<std::size_t> after;
    std::optional<std::size_t> before;
    for (std::size_t j = 0; j < map.pairs.size(); ++j) {
      const std::size_t r = rank(map.pairs[j].first->value);
      if (r < mine && (!after || r >= rank(map.pairs[*after].first->value))) after = j;
      if (r > mine && r < order.size() && !before) before = j;
    }
    if (!after && !before && !map.pairs.empty()) after = map.pairs.size() - 1;
    if (after && mine >= order.size()) after = map.pairs.size() - 1;

    const std::size_t start = offset(map.location);
    const std::string flow_item =
        fmt::format("{}: {}", keys.front(),
                    keys.size() == 1
                        ? value
                        : flow_nest(std::vector<std::string>(keys.begin() + 1, keys.end()), value));
    if (is_flow(text_[start])) {
      if (map.pairs.empty()) {
        text_.insert(start + 1, flow_item);
      } else if (after) {
        const YamlNode& v = *map.pairs[*after].second;
        text_.insert(span_end(v, offset(v.location)), ", " + flow_item);
      } else {
        text_.insert(offset(map.pairs[*before].first->location), flow_item + ", ");
      }
      return;
    }
    // A block map: lines at its keys' indentation, nested keys two spaces deeper.
    const std::string indent(static_cast<std::size_t>(map.location.column - 1), ' ');
    std::string lines;
    for (std::size_t k = 0; k + 1 < keys.size(); ++k)
      lines += fmt::format("{}{}{}:\n", indent, std::string(2 * k, ' '), keys[k]);
    lines += fmt::format("{}{}{}: {}\n", indent, std::string(2 * (keys.size() - 1), ' '),
                         keys.back(), value);
    std::size_t at = 0;
    if (after) {
      std::vector<Step> to_pair = path;
      to_pair.push_back({&map, *after});
      const std::size_t end =
          content_end(offset(map.pairs[*after].first->location), limit(to_pair, path.size()));
      if (end == text_.size()) lines = "\n" + lines.substr(0, lines.size() - 1);
      at = end == text_.size() ? end : end + 1;
    } else {
      // Above the comment lines that lead into the key it goes before.
      at = line_start(offset(map.pairs[*before].first->location));
      while (at > 0) {
        const std::size_t prev = line_start(at - 1);
        const std::string_view line = std::string_view(text_).substr(prev, at - 1 - prev);
        const std::size_t c = line.find_first_not_of(' ');
        if (c == std::string_view::npos || line[c] != '#') break;
        at = prev;
      }
    }
    text_.insert(at, lines);
  }

  std::string text_;
  std::string file_;
  YamlNodePtr root_;
  std::size_t bom_ = 0;
  std::vector<std::size_t> line_starts_;
};

// "training, device": the sections in which two configs differ, for a message.
std::string differing_sections(const Config& a, const Config& b) {
  std::string out;
  const auto add = [&](bool same, const char* name) {
    if (!same) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(a.version == b.version && a.name == b.name, "version or name");
  add(a.model == b.model, "model");
  add(a.replication == b.replication, "replication");
  add(a.variables == b.variables, "variables");
  add(a.sharding == b.sharding, "sharding");
  add(a.remote == b.remote, "remote");
  add(a.execution == b.execution, "execution");
  add(a.training == b.training, "training");
  add(a.data == b.data, "data");
  add(a.eval == b.eval, "eval");
  add(a.device == b.device, "device");
  return out;
}

}  // namespace

TextEdit set_in_text(std::string_view text, const std::string& filename,
                     const std::vector<std::string>& settings) {
  TextEdit out;
  Editor editor(text, filename);
  for (std::size_t i = 0; i < settings.size(); ++i) {
    try {
      if (editor.apply(settings[i])) out.changed.push_back(settings[i]);
    } catch (const EditError& e) {
      out.diagnostics.push_back({Severity::kError, "--set", static_cast<int>(i) + 1, 1,
                                 fmt::format("{}: {}", settings[i], e.message)});
    }
  }
  out.text = editor.text();
  return out;
}

std::vector<std::string> write_config_with(const std::string& source,
                                           const std::vector<std::string>& settings,
                                           const Config& expected, const std::string& destination) {
  const std::string text =
      open_input_file(source, "give the path of a YAML config file").read_all(kMaxSourceBytes);
  TextEdit edit = set_in_text(text, source, settings);
  if (has_errors(edit.diagnostics))
    throw Error("{}: cannot apply {} to the text; nothing written", source,
                edit.diagnostics.front().message);
  AtomicFile out(destination, TemporaryName::kHiddenPerProcess);
  out.write(edit.text.data(), edit.text.size());
  // Loaded as the temporary, in the destination's folder: a relative device.profile
  // resolves as it will from the written file.
  const LoadResult back = load_config_string(edit.text, out.temporary());
  if (!back.config) {
    const Diagnostic& d = back.diagnostics.front();
    throw Error("the config written for {} does not load ({}:{}: {}); nothing written", destination,
                d.line, d.column, d.message);
  }
  if (!(*back.config == expected))
    throw Error(
        "the config written for {} loads with another {} than the one tuned; nothing "
        "written",
        destination, differing_sections(*back.config, expected));
  const auto& a = back.config->device.resolved;
  const auto& b = expected.device.resolved;
  std::error_code ec;
  if (a.has_value() != b.has_value() ||
      (a && a->source != b->source && !std::filesystem::equivalent(a->source, b->source, ec)))
    throw Error(
        "the config written for {} reads device.profile '{}' from {}, not {}; write it "
        "in the folder of {} or give the profile by name; nothing written",
        destination, expected.device.profile, a ? a->source : "nowhere", b ? b->source : "nowhere",
        source);
  out.commit();
  return edit.changed;
}

}  // namespace popkit::config
