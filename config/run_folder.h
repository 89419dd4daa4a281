// A run folder (poprun's runs/<name>/<stamp>/, or --run-dir) holds its resolved config
// (kRunConfigFileName) beside its run file (kRunRecordFileName): every tool that takes a
// config takes the folder, or its run file, for that config.
#pragma once

#include <string>

#include "config/config.h"

namespace popkit::config {

inline constexpr const char* kRunRecordFileName = "run.json";

// The run folder `path` names: `path` itself when it is a folder holding a
// kRunConfigFileName, or the folder of a run file (FOLDER/run.json) beside one; "" when
// it names none.
std::string run_folder_of(const std::string& path);

// The config file `path` stands for: its run folder's config.yaml, or `path` itself.
std::string config_file_of(const std::string& path);

}  // namespace popkit::config
