// Diagnostics in the compiler shape: `file:line:column: error: message`, then the
// source line and a caret under the column; notes and warnings the same way.
// Also printed as JSON for CI tools.
#pragma once

#include <cstddef>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace popkit::config {

enum class Severity { kError, kWarning, kNote };

struct Diagnostic {
  Severity severity = Severity::kError;
  std::string file;  // the config path, or "--set" for an override
  int line = 0;      // 1-based; 0 = no position (e.g. a missing file)
  int column = 0;    // 1-based
  std::string message;
};

// A position: `file` names a SourceMap entry; line and column are 1-based.
struct Location {
  std::string file;
  int line = 0;
  int column = 0;
};

// file name -> its text, so a printer can show the offending line.
using SourceMap = std::map<std::string, std::string>;

enum class DiagnosticFormat { kText, kJson };

void print_diagnostics(std::ostream& out, const std::vector<Diagnostic>& diagnostics,
                       const SourceMap& sources, DiagnosticFormat format = DiagnosticFormat::kText);

[[nodiscard]] bool has_errors(const std::vector<Diagnostic>& diagnostics);

// The offset of the first byte that is not well-formed UTF-8, or npos.
std::size_t first_invalid_utf8(std::string_view text);

// `text` as a JSON string literal, quotes included (for tools that wrap the JSON above).
[[nodiscard]] std::string json_quote(std::string_view text);

}  // namespace popkit::config
