// Printing diagnostics as text (compiler shape, with the source line and a caret) and
// as JSON; see diagnostics.h.
#include "config/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

namespace popkit::config {
namespace {

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kNote:
      return "note";
  }
  return "error";
}

std::optional<std::string_view> source_line(std::string_view text, std::size_t start);

// Where each line of a source starts, computed once per source so that printing many
// diagnostics of a large file stays linear.
class LineIndex {
 public:
  std::optional<std::string_view> line(const std::string& text, int line) {
    auto [it, inserted] = starts_.try_emplace(&text);
    if (inserted) {
      it->second.push_back(0);
      for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\n') it->second.push_back(i + 1);
      }
    }
    const auto& starts = it->second;
    if (line < 1 || static_cast<std::size_t>(line) > starts.size()) return std::nullopt;
    return source_line(text, starts[static_cast<std::size_t>(line - 1)]);
  }

 private:
  std::map<const std::string*, std::vector<std::size_t>> starts_;
};

// The line starting at byte `start` of `text`, without its line break.
std::optional<std::string_view> source_line(std::string_view text, std::size_t start) {
  if (start > text.size()) return std::nullopt;
  std::size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  std::string_view out = text.substr(start, end - start);
  if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
  return out;
}

// Control characters and bytes that are not well-formed UTF-8 become '?', so a broken
// file cannot garble the terminal; the width in columns stays the same.
std::string printable(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7F) c = '?';
  }
  for (std::size_t bad; (bad = first_invalid_utf8(out)) != std::string::npos;) out[bad] = '?';
  return out;
}

// The caret line: the line's own tabs are copied so the caret lands under the column
// on any tab width; a UTF-8 sequence counts as one column.
std::string caret_line(std::string_view line, int column) {
  std::string out;
  const std::size_t stop = std::min<std::size_t>(static_cast<std::size_t>(column - 1), line.size());
  for (std::size_t i = 0; i < stop; ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if ((c & 0xC0) == 0x80) continue;
    out += line[i] == '\t' ? '\t' : ' ';
  }
  if (static_cast<std::size_t>(column - 1) > line.size()) {
    out.append(static_cast<std::size_t>(column - 1) - line.size(), ' ');
  }
  out += '^';
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void print_text(std::ostream& out, const Diagnostic& d, const SourceMap& sources,
                LineIndex& index) {
  if (d.file.empty()) {
    out << fmt::format("{}: {}\n", severity_name(d.severity), d.message);
    return;
  }
  if (d.line <= 0) {
    out << fmt::format("{}: {}: {}\n", d.file, severity_name(d.severity), d.message);
    return;
  }
  out << fmt::format("{}:{}:{}: {}: {}\n", d.file, d.line, d.column, severity_name(d.severity),
                     d.message);
  const auto source = sources.find(d.file);
  if (source == sources.end()) return;
  const auto line = index.line(source->second, d.line);
  if (!line || line->empty()) return;
  out << printable(*line) << '\n' << caret_line(*line, std::max(d.column, 1)) << '\n';
}

}  // namespace

// Overlong forms, surrogates and code points above U+10FFFF are rejected as RFC 3629
// requires.
std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    unsigned lo = 0x80;
    unsigned hi = 0xBF;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return i;
      const auto d = static_cast<unsigned char>(s[i + k]);
      const unsigned min = k == 1 ? lo : 0x80;
      const unsigned max = k == 1 ? hi : 0xBF;
      if (d < min || d > max) return i;
    }
    i += n + 1;
  }
  return std::string_view::npos;
}

void print_diagnostics(std::ostream& out, const std::vector<Diagnostic>& diagnostics,
                       const SourceMap& sources, DiagnosticFormat format) {
  if (format == DiagnosticFormat::kText) {
    LineIndex index;
    for (const auto& d : diagnostics) print_text(out, d, sources, index);
    return;
  }
  std::size_t n_errors = 0;
  std::size_t n_warnings = 0;
  out << "{\"diagnostics\": [";
  for (std::size_t i = 0; i < diagnostics.size(); ++i) {
    const Diagnostic& d = diagnostics[i];
    n_errors += d.severity == Severity::kError ? 1 : 0;
    n_warnings += d.severity == Severity::kWarning ? 1 : 0;
    out << (i == 0 ? "" : ", ")
        << fmt::format(
               "{{\"severity\": \"{}\", \"file\": {}, \"line\": {}, \"column\": {}, "
               "\"message\": {}}}",
               severity_name(d.severity), json_string(printable(d.file)), d.line, d.column,
               json_string(d.message));
  }
  out << fmt::format("], \"errors\": {}, \"warnings\": {}}}", n_errors, n_warnings);
}

std::string json_quote(std::string_view text) {
  return json_string(text);
}

bool has_errors(const std::vector<Diagnostic>& diagnostics) {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::kError; });
}

}  // namespace popkit::config
