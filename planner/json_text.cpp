// Parsing JSON text with positions in errors and arrays split off as they are parsed
// (see json_text.h). nlohmann's lexer and parser do the reading, but for the plain numbers
// of a claimed array (Builder::skim); the DOM is built here, by SAX events, so that
// claimed arrays never enter it.
#include "planner/json_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <utility>

#include "base/input_file.h"

namespace popkit::planner {
namespace {

using nlohmann::json;

// Text quoted in a message (a token, a source line) is cut to this many bytes.
constexpr std::size_t kMaxQuoted = 40;
// A source line longer than this is shown as a window around the column, starting at
// most kExcerptBefore bytes before it.
constexpr std::size_t kMaxExcerpt = 100;
constexpr std::size_t kExcerptBefore = 60;

std::string clipped(std::string_view s) {
  if (s.size() <= kMaxQuoted) return std::string(s);
  return std::string(s.substr(0, kMaxQuoted)) + "...";
}

// Control bytes and bytes outside ASCII become '?' (one byte, one column, so the caret
// stays under the column, which JSON positions count in bytes); tabs stay tabs.
std::string printable(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u >= 0x7F) c = '?';
  }
  return out;
}

// "FILE:LINE:COLUMN: MESSAGE", then the line (a window of it when long) and a caret
// under the byte at `offset`. Lines and columns start at 1; columns count bytes.
std::string located(std::string_view text, const std::string& filename, std::size_t offset,
                    const std::string& message) {
  offset = std::min(offset, text.size());
  const std::size_t line =
      1 + static_cast<std::size_t>(
              std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
  const std::size_t newline = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  const std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  std::size_t line_end = text.find('\n', offset);
  if (line_end == std::string_view::npos) line_end = text.size();
  if (line_end > line_start && text[line_end - 1] == '\r') --line_end;
  const std::size_t column = offset - line_start + 1;
  std::string out = fmt::format("{}:{}:{}: {}", filename, line, column, message);
  if (line_end <= line_start || !named_as(filename, {".json", ".jsonl"})) return out;
  std::size_t from = line_start;
  std::size_t to = line_end;
  if (to - from > kMaxExcerpt) {
    from = std::max(line_start, offset > kExcerptBefore ? offset - kExcerptBefore : 0);
    to = std::min(line_end, from + kMaxExcerpt);
  }
  const std::string before = from > line_start ? "..." : "";
  const std::string after = to < line_end ? "..." : "";
  const std::string shown = printable(text.substr(from, to - from));
  std::string caret = std::string(before.size(), ' ');
  for (std::size_t i = from; i < offset && i < to; ++i) caret += text[i] == '\t' ? '\t' : ' ';
  if (offset > to) caret.append(offset - to, ' ');
  caret += '^';
  return fmt::format("{}\n{}{}{}\n{}", out, before, shown, after, caret);
}

// nlohmann's message without its id and its own position ("[json.exception.
// parse_error.101] parse error at line 1, column 5: "), the token it quotes cut short.
std::string parse_message(const nlohmann::detail::exception& e, const std::string& token) {
  std::string m = e.what();
  if (!m.empty() && m.front() == '[') {
    const std::size_t close = m.find("] ");
    if (close != std::string::npos) m.erase(0, close + 2);
  }
  if (m.rfind("parse error", 0) == 0) {
    const std::size_t colon = m.find(": ");
    if (colon != std::string::npos) m.erase(0, colon + 2);
  }
  const std::string quoted = "last read: '" + token + "'";
  const std::size_t at = m.find(quoted);
  if (at != std::string::npos && token.size() > kMaxQuoted) {
    m.replace(at, quoted.size(), "last read: '" + clipped(token) + "'");
  }
  return m;
}

// The lexer reads through this iterator. Every copy reads at one shared position (the end
// iterator stands at the text's end), so the builder knows how far the lexer has read when
// it refuses a value (nlohmann reports positions only for its own errors), and can move
// the lexer past the numbers of a claimed array that it read itself (Builder::skim).
class SharedCursor {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  explicit SharedCursor(const char** at) : at_(at) {}
  explicit SharedCursor(const char* end) : end_(end) {}
  reference operator*() const { return **at_; }
  SharedCursor& operator++() {
    ++*at_;
    return *this;
  }
  SharedCursor operator++(int) {
    SharedCursor old = *this;
    ++*this;
    return old;
  }
  bool operator==(const SharedCursor& other) const { return where() == other.where(); }

 private:
  [[nodiscard]] const char* where() const { return at_ != nullptr ? *at_ : end_; }

  const char** at_ = nullptr;
  const char* end_ = nullptr;
};

[[nodiscard]] bool json_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

[[nodiscard]] const char* skip_space(const char* p, const char* end) {
  while (p != end && json_space(*p)) ++p;
  return p;
}

[[nodiscard]] bool digit(char c) {
  return c >= '0' && c <= '9';
}

// [p, q) read as a T, when all of it reads and the value is in T's range.
template <typename T>
std::optional<json> number_as(const char* p, const char* q) {
  T v{};
  const auto r = std::from_chars(p, q, v);
  if (r.ec != std::errc() || r.ptr != q) return std::nullopt;
  return json(v);
}

// The JSON number at p (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?) as
// nlohmann's lexer makes it (an integer >= 0 unsigned, < 0 signed, else a double), and
// where it ends; nullopt where there is none, or where nlohmann's reading differs (an
// integer beyond 64 bits becomes a double, a double beyond its range an error, one too
// small for a double zero): the lexer reads those itself.
std::optional<json> plain_number(const char* p, const char* end, const char*& after) {
  const char* q = p;
  if (q != end && *q == '-') ++q;
  if (q == end || !digit(*q)) return std::nullopt;
  if (*q == '0') {
    ++q;
  } else {
    while (q != end && digit(*q)) ++q;
  }
  bool integer = true;
  if (q != end && *q == '.') {
    ++q;
    if (q == end || !digit(*q)) return std::nullopt;
    while (q != end && digit(*q)) ++q;
    integer = false;
  }
  if (q != end && (*q == 'e' || *q == 'E')) {
    ++q;
    if (q != end && (*q == '+' || *q == '-')) ++q;
    if (q == end || !digit(*q)) return std::nullopt;
    while (q != end && digit(*q)) ++q;
    integer = false;
  }
  after = q;
  if (!integer) return number_as<double>(p, q);
  return *p == '-' ? number_as<std::int64_t>(p, q) : number_as<std::uint64_t>(p, q);
}

// SAX events -> DOM, as nlohmann's own DOM parser builds it (a repeated key keeps its
// last value), except that arrays a split claims go to the split element by element.
class Builder {
 public:
  Builder(std::initializer_list<JsonSplit*> splits, std::string_view text, const char** read)
      : splits_(splits), begin_(text.data()), end_(text.data() + text.size()), read_(read) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const std::string& /*text*/) { return value(json(v)); }
  bool string(std::string& v) { return value(json(std::move(v))); }
  bool binary(json::binary_t& /*v*/) { return true; }  // not in JSON text

  bool start_object(std::size_t /*n*/) {
    if (!depth_ok()) return too_deep();
    return open(json::object(), nullptr, 0);
  }
  bool key(std::string& k) {
    Frame& f = stack_.back();
    if (tracked()) path_.set_key(k);
    f.slot = &(*f.container)[std::move(k)];
    return true;
  }
  bool end_object() { return close(); }

  bool start_array(std::size_t /*n*/) {
    if (!depth_ok()) return too_deep();
    if (offered()) {
      prepare_path();
      for (JsonSplit* split : splits_) {
        if (const auto id = split->begin_array(path_)) {
          open(json::binary(json::binary_t::container_type{}, *id), split, *id);
          skim();
          return true;
        }
      }
    }
    return open(json::array(), nullptr, 0);
  }
  bool end_array() { return close(); }

  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& e) {
    position += skimmed_;  // the lexer did not read what skim() did
    if (e.id == 406) {     // a number beyond a double's range: point at its first byte
      error_offset_ = position >= token.size() ? position - token.size() : 0;
      error_ = "number out of range: " + clipped(token);
    } else {  // nlohmann's position is just past the offending byte
      error_offset_ = position > 0 ? position - 1 : 0;
      error_ = "not JSON: " + parse_message(e, token);
    }
    return false;
  }

  json& root() { return root_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] std::size_t error_offset() const { return error_offset_; }

 private:
  // An open object or array. A DOM container (`split` null) takes its values itself,
  // an object's at `slot` (set by each key); a claimed array hands them to its split.
  struct Frame {
    json* container = nullptr;
    json* slot = nullptr;
    JsonSplit* split = nullptr;
    std::uint64_t id = 0;
    std::size_t n = 0;          // elements handed over so far (claimed arrays)
    bool element_root = false;  // the root of an element of a claimed array
  };

  // Just after a claimed array's '[': its numbers read here, straight to the split, and the
  // lexer moved past them (nlohmann's lexer and strtod take ten times as long; a run file
  // is mostly its steps' numbers). Only numbers that the lexer would read as the same
  // value, each followed by a ',' and another such number: the last element, and
  // anything else, the lexer reads as before, so the same text is accepted or refused as
  // before, with the same message at the same place.
  void skim() {
    Frame& f = stack_.back();
    const char* start = *read_;
    const char* next = skip_space(start, end_);
    const char* committed = start;
    std::optional<json> pending;
    while (true) {
      const char* after = nullptr;
      std::optional<json> v = plain_number(next, end_, after);
      if (!v) break;
      if (pending) {
        f.split->element(f.id, f.n++, std::move(*pending));
        committed = next;
      }
      const char* comma = skip_space(after, end_);
      if (comma == end_ || *comma != ',') break;
      pending = std::move(v);
      next = skip_space(comma + 1, end_);
    }
    skimmed_ += static_cast<std::size_t>(committed - start);
    *read_ = committed;
  }

  [[nodiscard]] bool depth_ok() const { return stack_.size() < kMaxJsonDepth; }

  bool too_deep() {
    // The lexer has just read the '[' or '{' that opens the level too many.
    error_offset_ = static_cast<std::size_t>(*read_ - begin_) - 1;
    error_ = fmt::format("nesting deeper than {} levels", kMaxJsonDepth);
    return false;
  }

  // Paths are tracked, and arrays offered to the splits, outside claimed arrays only.
  [[nodiscard]] bool tracked() const { return in_element_ == 0; }
  [[nodiscard]] bool offered() const {
    return in_element_ == 0 && (stack_.empty() || stack_.back().split == nullptr);
  }

  // The path of the value about to start, when its parent is a DOM array.
  void prepare_path() {
    if (!stack_.empty() && stack_.back().split == nullptr && stack_.back().container->is_array()) {
      path_.set_index(stack_.back().container->size());
    }
  }

  // Puts a new value in its place: the root, its parent container, or (inside a claimed
  // array) the element being built, or straight to the split when it is a scalar.
  // Returns where it went (nullptr: to the split) and whether it is an element's root.
  std::pair<json*, bool> place(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return {&root_, false};
    }
    Frame& f = stack_.back();
    if (f.split != nullptr) {
      if (!v.is_object() && !v.is_array()) {
        f.split->element(f.id, f.n++, std::move(v));
        return {nullptr, false};
      }
      element_ = std::move(v);
      return {&element_, true};
    }
    if (f.container->is_array()) {
      f.container->push_back(std::move(v));
      return {&f.container->back(), false};
    }
    *f.slot = std::move(v);
    return {f.slot, false};
  }

  bool value(json&& v) {
    place(std::move(v));
    return true;
  }

  // Opens an object or array; `split` set: a claimed array, `v` its placeholder.
  bool open(json&& v, JsonSplit* split, std::uint64_t id) {
    const bool is_array = v.is_array() || split != nullptr;
    if (tracked()) prepare_path();
    const auto [where, element_root] = place(std::move(v));
    Frame f;
    if (split != nullptr) {
      f.split = split;
      f.id = id;
    } else {
      f.container = where;
    }
    f.element_root = element_root;
    if (element_root || in_element_ > 0) {
      ++in_element_;
    } else if (is_array) {
      path_.push_index();
    } else {
      path_.push_key();
    }
    stack_.push_back(f);
    return true;
  }

  bool close() {
    const Frame f = stack_.back();
    stack_.pop_back();
    if (in_element_ > 0) {
      --in_element_;
    } else {
      path_.pop();
    }
    if (f.element_root) {
      Frame& parent = stack_.back();
      parent.split->element(parent.id, parent.n++, std::move(element_));
      element_ = json();
    }
    return true;
  }

  std::initializer_list<JsonSplit*> splits_;
  const char* begin_;
  const char* end_;
  const char** read_;        // how far the lexer has read
  std::size_t skimmed_ = 0;  // bytes skim() read, which the lexer's positions leave out
  json root_;
  json element_;  // the element of a claimed array being built
  std::vector<Frame> stack_;
  JsonPath path_;
  std::size_t in_element_ = 0;  // open containers inside a claimed array's element
  std::string error_;
  std::size_t error_offset_ = 0;
};

}  // namespace

std::string JsonPath::str() const {
  std::string out;
  for (const Step& s : steps_) {
    if (s.is_index) {
      out += fmt::format("[{}]", s.index);
    } else {
      if (!out.empty()) out += '.';
      out += s.key;
    }
  }
  return out;
}

bool JsonPath::matches(std::initializer_list<std::string_view> pattern) const {
  if (pattern.size() != steps_.size()) return false;
  std::size_t i = 0;
  for (const std::string_view p : pattern) {
    const Step& s = steps_[i++];
    if (p == "[]" ? !s.is_index : (s.is_index || s.key != p)) return false;
  }
  return true;
}

nlohmann::json parse_json(std::string_view text, const std::string& filename,
                          std::initializer_list<JsonSplit*> splits) {
  // A file that does not begin as a JSON document does (a user's file named .json by
  // mistake, the password file) is refused without a word of its contents.
  const std::size_t start = text.find_first_not_of(" \t\r\n");
  if (start != std::string_view::npos &&
      std::string_view("{[\"-0123456789tfn").find(text[start]) == std::string_view::npos) {
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(start), '\n');
    const std::size_t newline = text.rfind('\n', start);
    const std::size_t column = newline == std::string_view::npos ? start + 1 : start - newline;
    throw Error(
        "{}:{}:{}: not JSON: a JSON document begins with '{{', '[', a string, a number, true, "
        "false or null",
        filename, line, column);
  }
  const char* read = text.data();
  Builder builder(splits, text, &read);
  const SharedCursor first(&read);
  const SharedCursor last(text.data() + text.size());
  if (!json::sax_parse(first, last, &builder)) {
    throw Error("{}", located(text, filename, builder.error_offset(), builder.error()));
  }
  return std::move(builder.root());
}

}  // namespace popkit::planner
