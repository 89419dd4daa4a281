#include "config/run_folder.h"

#include <filesystem>

namespace popkit::config {

namespace fs = std::filesystem;

std::string run_folder_of(const std::string& path) {
  std::error_code ec;
  fs::path folder(path);
  if (!fs::is_directory(folder, ec)) {
    if (folder.filename() != kRunRecordFileName || !fs::is_regular_file(folder, ec)) return {};
    folder = folder.parent_path();
    if (folder.empty()) folder = ".";
  }
  return fs::is_regular_file(folder / kRunConfigFileName, ec) ? folder.string() : std::string();
}

std::string config_file_of(const std::string& path) {
  const std::string folder = run_folder_of(path);
  return folder.empty() ? path : (fs::path(folder) / kRunConfigFileName).string();
}

}  // namespace popkit::config
