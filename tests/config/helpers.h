// Shared helpers of the config tests: load a YAML string and pick out diagnostics.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "config/yaml/load.h"

namespace popkit::config::test {

// The smallest valid config, for tests that add one section to it.
inline const std::string kBase = R"(version: 1
model:
  layers:
    - {name: fc1, out_features: 16, activation: relu}
    - {name: fc2, out_features: 10}
)";

inline LoadResult load(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return load_config_string(yaml, "test.yaml", overrides);
}

// Messages of one severity, in order.
inline std::vector<std::string> messages(const LoadResult& result, Severity severity) {
  std::vector<std::string> out;
  for (const auto& d : result.diagnostics) {
    if (d.severity == severity) out.push_back(d.message);
  }
  return out;
}

inline std::vector<std::string> errors(const std::string& yaml,
                                       const std::vector<std::string>& overrides = {}) {
  return messages(load(yaml, overrides), Severity::kError);
}

inline std::vector<std::string> warnings(const std::string& yaml) {
  return messages(load(yaml), Severity::kWarning);
}

// The diagnostics as `popplan validate` prints them.
inline std::string text(const LoadResult& result) {
  std::ostringstream out;
  print_diagnostics(out, result.diagnostics, result.sources);
  return out.str();
}

using Messages = std::vector<std::string>;

}  // namespace popkit::config::test
