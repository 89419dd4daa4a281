// Builds YamlNode trees from yaml-cpp's event stream; see yaml_tree.h for the guards.
#include "config/yaml/yaml_tree.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <map>
#include <sstream>

namespace popkit::config {
namespace {

// Thrown from inside the event handler to stop the parser at the first guard it trips.
struct TreeError {
  Location location;
  std::string message;
};

// A position used for errors that have no mark of their own: the end of the text.
Location end_of(std::string_view text, const std::string& file, int line_offset) {
  int line = 1;
  int column = 1;
  for (char c : text) {
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  if (column == 1 && line > 1) {
    --line;
    column = 1;
  }
  return {file, line + line_offset, column};
}

// Line and column (1-based, columns in bytes) of a byte offset.
std::pair<int, int> line_column(std::string_view text, std::size_t offset) {
  int line = 1;
  int column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

class TreeBuilder : public YAML::EventHandler {
 public:
  TreeBuilder(std::string_view text, std::string file, int line_offset, int column_offset)
      : text_(text),
        file_(std::move(file)),
        line_offset_(line_offset),
        column_offset_(column_offset) {}

  YamlNodePtr root() const { return root_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto node = std::make_shared<YamlNode>();
    node->kind = NodeKind::kNull;
    node->location = location(mark);
    // `key:` with nothing after it: yaml-cpp marks the next token, often lines below;
    // the place to point at is just after the key.
    if (!stack_.empty() && stack_.back().pending_key &&
        stack_.back().pending_key->location.line < node->location.line) {
      const YamlNode& key = *stack_.back().pending_key;
      node->location = key.location;
      node->location.column += static_cast<int>(key.value.size()) + 1;
    }
    add(node, 1, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = anchors_.find(anchor);
    if (it == anchors_.end()) {
      throw TreeError{location(mark),
                      "alias refers to a node that contains it (a recursive alias)"};
    }
    add(it->second.first, it->second.second, 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    auto node = std::make_shared<YamlNode>();
    node->kind = NodeKind::kScalar;
    node->location = location(mark);
    node->value = value;
    // yaml-cpp tags a quoted or block scalar "!" and a plain one "?".
    node->plain = tag == "?";
    if (!node->plain) check_quote_closed(mark, node->location);
    add(node, 1, anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(NodeKind::kSequence, mark, anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(NodeKind::kMap, mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    std::shared_ptr<YamlNode> node;
    YAML::anchor_t anchor = 0;
    std::size_t size = 1;  // nodes below and including this one, aliases expanded
    YamlNodePtr pending_key;
  };

  // yaml-cpp 0.7 takes a quoted scalar left open to the end of the text as a string;
  // a config never means that.
  void check_quote_closed(const YAML::Mark& mark, const Location& where) const {
    if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text_.size()) return;
    const char quote = text_[static_cast<std::size_t>(mark.pos)];
    if (quote != '"' && quote != '\'') return;
    for (std::size_t i = static_cast<std::size_t>(mark.pos) + 1; i < text_.size(); ++i) {
      if (quote == '"' && text_[i] == '\\') {
        ++i;
      } else if (text_[i] == quote) {
        if (quote == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
          ++i;  // '' is an escaped quote inside single quotes
        } else {
          return;
        }
      }
    }
    throw TreeError{where, fmt::format("YAML syntax: the string opened here with {} is never "
                                       "closed",
                                       quote)};
  }

  Location location(const YAML::Mark& mark) const {
    return {file_, mark.line + 1 + line_offset_,
            mark.column + 1 + (mark.line == 0 ? column_offset_ : 0)};
  }

  void count(std::size_t n, const Location& where) {
    n_nodes_ += n;
    if (n_nodes_ > kMaxNodes) {
      throw TreeError{where, fmt::format("the document expands to more than {} nodes (aliases "
                                         "counted at every use); a config is far smaller",
                                         kMaxNodes)};
    }
  }

  void open(NodeKind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    auto node = std::make_shared<YamlNode>();
    node->kind = kind;
    node->location = location(mark);
    if (static_cast<int>(stack_.size()) >= kMaxDepth) {
      throw TreeError{
          node->location,
          fmt::format("nesting deeper than {} levels; a config needs a handful", kMaxDepth)};
    }
    count(1, node->location);
    stack_.push_back({node, anchor, 1, nullptr});
  }

  void close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    if (frame.anchor != 0) anchors_[frame.anchor] = {frame.node, frame.size};
    attach(frame.node, frame.size);
  }

  void add(const YamlNodePtr& node, std::size_t size, YAML::anchor_t anchor) {
    count(size, node->location);
    if (anchor != 0) anchors_[anchor] = {node, size};
    attach(node, size);
  }

  void attach(const YamlNodePtr& node, std::size_t size) {
    if (stack_.empty()) {
      root_ = node;
      return;
    }
    Frame& parent = stack_.back();
    parent.size += size;
    if (parent.node->kind == NodeKind::kSequence) {
      parent.node->items.push_back(node);
    } else if (!parent.pending_key) {
      parent.pending_key = node;
    } else {
      parent.node->pairs.emplace_back(std::move(parent.pending_key), node);
      parent.pending_key = nullptr;
    }
  }

  std::string_view text_;
  std::string file_;
  int line_offset_;
  int column_offset_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, std::pair<YamlNodePtr, std::size_t>> anchors_;
  std::size_t n_nodes_ = 0;
  YamlNodePtr root_;
};

void error(std::vector<Diagnostic>& diagnostics, const Location& at, std::string message) {
  diagnostics.push_back({Severity::kError, at.file, at.line, at.column, std::move(message)});
}

// Lexical checks yaml-cpp does not make, or makes with messages that do not help.
// Returns false when the text must not be parsed.
bool check_text(std::string_view text, const std::string& file, int line_offset, int column_offset,
                std::vector<Diagnostic>& diagnostics) {
  auto at = [&](std::size_t offset) {
    auto [line, column] = line_column(text, offset);
    return Location{file, line + line_offset, column + (line == 1 ? column_offset : 0)};
  };
  if (text.size() > kMaxSourceBytes) {
    error(diagnostics, {file, 0, 0},
          fmt::format("the file is {} bytes; a config may be at most {} bytes", text.size(),
                      kMaxSourceBytes));
    return false;
  }
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    error(diagnostics, at(bad),
          fmt::format("byte 0x{:02X} is not valid UTF-8; a config must be UTF-8 text",
                      static_cast<unsigned char>(text[bad])));
    return false;
  }
  bool ok = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      error(diagnostics, at(i),
            fmt::format("control character U+{:04X} is not allowed in YAML text", c));
      return false;
    }
  }
  // YAML indents with spaces only; a tab in indentation is a syntax error that yaml-cpp
  // reports far from the tab, if at all.
  std::size_t line_start = 0;
  while (line_start <= text.size()) {
    std::size_t end = text.find('\n', line_start);
    if (end == std::string_view::npos) end = text.size();
    std::size_t i = line_start;
    std::size_t first_tab = std::string_view::npos;
    while (i < end && (text[i] == ' ' || text[i] == '\t')) {
      if (text[i] == '\t' && first_tab == std::string_view::npos) first_tab = i;
      ++i;
    }
    if (first_tab != std::string_view::npos && i < end && text[i] != '#' && text[i] != '\r') {
      error(diagnostics, at(first_tab), "tab character in indentation; YAML indents with spaces");
      ok = false;
    }
    line_start = end + 1;
  }
  return ok;
}

}  // namespace

YamlNodePtr parse_yaml(std::string_view text, const std::string& file,
                       std::vector<Diagnostic>& diagnostics, int line_offset, int column_offset) {
  if (!check_text(text, file, line_offset, column_offset, diagnostics)) return nullptr;
  // Skip a UTF-8 byte order mark; yaml-cpp would otherwise read it as content.
  std::string owned(text.substr(text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0));
  std::istringstream in(owned);
  TreeBuilder builder(owned, file, line_offset, column_offset);
  auto location_of = [&](const YAML::Mark& mark) {
    if (mark.is_null()) return end_of(owned, file, line_offset);
    return Location{file, mark.line + 1 + line_offset,
                    mark.column + 1 + (mark.line == 0 ? column_offset : 0)};
  };
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder)) {
      auto node = std::make_shared<YamlNode>();
      node->location = {file, 1 + line_offset, 1 + column_offset};
      return node;
    }
    TreeBuilder second(owned, file, line_offset, column_offset);
    if (parser.HandleNextDocument(second)) {
      const YamlNodePtr next = second.root();
      error(diagnostics, next ? next->location : end_of(owned, file, line_offset),
            "a second YAML document; a config file holds exactly one");
      return nullptr;
    }
  } catch (const TreeError& e) {
    error(diagnostics, e.location, e.message);
    return nullptr;
  } catch (const YAML::Exception& e) {
    error(diagnostics, location_of(e.mark), fmt::format("YAML syntax: {}", e.msg));
    return nullptr;
  }
  if (!builder.root()) {
    auto node = std::make_shared<YamlNode>();
    node->location = {file, 1 + line_offset, 1 + column_offset};
    return node;
  }
  return builder.root();
}

std::string describe(const YamlNode& node) {
  switch (node.kind) {
    case NodeKind::kNull:
      return "null";
    case NodeKind::kSequence:
      return "a sequence";
    case NodeKind::kMap:
      return "a mapping";
    case NodeKind::kScalar:
      break;
  }
  std::string shown = node.value.size() > 40 ? node.value.substr(0, 40) + "..." : node.value;
  return node.plain ? fmt::format("'{}'", shown) : fmt::format("the string \"{}\"", shown);
}

}  // namespace popkit::config
