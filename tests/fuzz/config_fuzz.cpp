// libFuzzer target for the config loader: any bytes must give diagnostics or a Config,
// never a crash, hang or sanitizer report. Leading lines `#set key=value` (YAML
// comments, so the rest still parses) become --set overrides, to fuzz those too.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "config/yaml/load.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  std::size_t start = 0;
  while (text.substr(start, 5) == "#set ") {
    const std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) break;
    overrides.emplace_back(text.substr(start + 5, end - start - 5));
    start = end + 1;
  }
  using namespace popkit::config;
  const LoadResult result = load_config_string(text, "fuzz.yaml", overrides);
  // A loaded config has no errors, and a failed load says why.
  POPKIT_ASSERT(result.ok() == !has_errors(result.diagnostics));
  std::ostringstream out;
  print_diagnostics(out, result.diagnostics, result.sources, DiagnosticFormat::kText);
  print_diagnostics(out, result.diagnostics, result.sources, DiagnosticFormat::kJson);
  return 0;
}
