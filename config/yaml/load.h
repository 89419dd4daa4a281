// Loading a config: YAML text -> Config, with every problem collected as a diagnostic
// that points at file:line:column (or at the `--set` argument that caused it).
// Loading validates too: a LoadResult with a config has no errors.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/diagnostics.h"

namespace popkit::config {

struct LoadResult {
  std::optional<Config> config;         // set when there are no errors
  std::vector<Diagnostic> diagnostics;  // errors, warnings and notes, in source order
  SourceMap sources;                    // the text of every source, for caret lines
  [[nodiscard]] bool ok() const { return config.has_value(); }
};

// `overrides` are `--set key.path=value` arguments, applied in order after the file.
// `path` may name a run folder, or its run file: its config.yaml (config/run_folder.h) is
// loaded.
LoadResult load_config_file(const std::string& path,
                            const std::vector<std::string>& overrides = {});
LoadResult load_config_string(std::string_view yaml, const std::string& filename,
                              const std::vector<std::string>& overrides = {});

// Why `path` is not read as a config though it is a file: a name not ending in .yaml or
// .yml (what it holds may be no config at all, so no line of it is shown); else empty.
std::string config_name_problem(const std::string& path);

// load_config_file, with every diagnostic (warnings too) printed to `err`: what the
// tools do before planning or training. The config is set when there are no errors.
std::optional<Config> load_config_reporting(const std::string& path,
                                            const std::vector<std::string>& overrides,
                                            std::ostream& err);

}  // namespace popkit::config
