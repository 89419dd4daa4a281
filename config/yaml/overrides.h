// `--set key.path=value` overrides, applied to the YAML tree before it is read
// (config/yaml/load.cpp), and the warning when one makes a grouping's size stale.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/diagnostics.h"
#include "config/validate.h"
#include "config/yaml/yaml_tree.h"

namespace popkit::config {

// The source name of the overrides: diagnostics about them point at "--set:LINE:COLUMN".
inline constexpr const char* kSetSource = "--set";

// Applies one `--set` argument (line `line` of the "--set" source). Returns the new
// root, or the old one with diagnostics when the argument is malformed.
YamlNodePtr apply_override(const YamlNodePtr& root, const std::string& argument, int line,
                           std::vector<Diagnostic>& diagnostics);

// The file's own replication.factor (before --set), or 1 when it sets none.
std::int64_t file_factor(const YamlNode& root);

// A grouping with a fixed group_size equal to the file's factor meant "all replicas";
// when --set changes the factor it silently stops meaning that (2 groups of 2 where the
// user asked for 4 replicas), so say so and name the fix.
void warn_stale_groupings(const Config& config, std::int64_t factor_in_file,
                          const Locations& locations, std::vector<Diagnostic>& diagnostics);

}  // namespace popkit::config
