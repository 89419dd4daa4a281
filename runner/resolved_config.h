// The config as resolved (defaults and --set applied) in the shape of the YAML file, for
// the run file, and its hash, which checkpoints carry so a resume can tell whether it
// continues under the same config.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"

namespace popkit::runner {

nlohmann::json resolved_config_json(const config::Config& config);

// FNV-1a 64 of resolved_config_json(config).dump(), as 16 hex digits.
std::string config_hash(const config::Config& config);

}  // namespace popkit::runner
