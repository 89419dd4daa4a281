// The config as resolved (defaults and --set applied) in the shape of the YAML file, for
// the run file and as a YAML file of its own in the run folder (config.yaml, loadable by
// every tool), and its hash, which checkpoints carry so a resume can tell whether it
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

// resolved_config_json as a YAML config file, opened by comments saying what it is, the
// command line that ran it and the config's hash. Loading it gives the same config (the
// same hash), but for a profile file given by a relative path, which is written as an
// absolute one: the file it is read from sits elsewhere than the config it came from.
// Data paths are the working directory's, as in any config. `run_length`, when the
// command line set it ("--steps 5"), is said in a comment: it overrides the training
// section's steps or epochs, which stay as the config has them (they are in its hash).
std::string resolved_config_yaml(const config::Config& config, const std::string& command,
                                 const std::string& run_length = "");

}  // namespace popkit::runner
