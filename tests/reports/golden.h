// Helpers of the reports tests: fixture files from tests/data/reports, loaded under their
// bare names so outputs do not depend on the checkout's path, and golden files compared
// exactly (set POPKIT_UPDATE_GOLDEN=1 to rewrite them after an intended change).
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "reports/json_reader.h"
#include "reports/source.h"

namespace popkit::reports::testing {

inline std::string data_dir() {
  return std::string(POPKIT_SOURCE_DIR) + "/tests/data/reports";
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline Source fixture(const std::string& name) {
  return source_from_json(read_json_file(data_dir() + "/" + name), name);
}

inline std::vector<Source> fixtures(const std::vector<std::string>& names) {
  std::vector<Source> out;
  for (const std::string& n : names) out.push_back(fixture(n));
  return out;
}

// The golden text of tests/data/reports/expected/<name>; rewritten from `actual` when
// POPKIT_UPDATE_GOLDEN is set.
inline std::string golden(const std::string& name, const std::string& actual) {
  const std::string path = data_dir() + "/expected/" + name;
  if (std::getenv("POPKIT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << actual;
  }
  return read_text(path);
}

}  // namespace popkit::reports::testing
