// Reading a calibration table (calibration_table.h).
#include "config/yaml/calibration_table.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <string_view>

#include "base/error.h"
#include "base/input_file.h"
#include "config/yaml/load.h"

namespace popkit::config {
namespace {

constexpr std::uint64_t kMaxTableBytes = 1 << 20;
constexpr const char* kHeader = "case,config,set,samples_per_second";
constexpr std::string_view kEvalFlag = "--eval";  // in `set`: the row ran the evaluation program

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (const char c : s) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

}  // namespace

CalibrationTable load_calibration_table(const std::string& path) {
  CalibrationTable t;
  auto error = [&](int line, int column, std::string message) {
    t.diagnostics.push_back({Severity::kError, path, line, column, std::move(message)});
  };
  if (std::error_code regular_ec;
      !named_as(path, {".csv"}) && std::filesystem::is_regular_file(path, regular_ec)) {
    // Not read: its values would show in the diagnostics ("got '...'").
    error(0, 0, "is not a calibration table: a table's name ends in .csv; it was not read");
    return t;
  }
  std::string text;
  try {
    InputFile file = open_input_file(path, "give the path of a calibration table (CSV)");
    text = file.read_all(kMaxTableBytes, "calibration table");
  } catch (const Error& e) {
    error(0, 0, e.what());
    return t;
  }
  t.sources[path] = text;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  bool header = false;
  int header_line = 1;
  int line_no = 0;
  for (std::string line : split(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != kHeader)
        error(line_no, 1, fmt::format("the first line must be the header '{}'", kHeader));
      header = true;
      header_line = line_no;
      continue;
    }
    const auto cells = split(line, ',');
    if (cells.size() != 4) {
      error(line_no, 1,
            fmt::format("a row has 4 cells (case, config, set, samples_per_second), got {}",
                        cells.size()));
      continue;
    }
    const int measured_column = static_cast<int>(line.size() - cells[3].size()) + 1;
    double measured = 0.0;
    const auto [end, ec] =
        std::from_chars(cells[3].data(), cells[3].data() + cells[3].size(), measured);
    if (ec != std::errc() || end != cells[3].data() + cells[3].size() || !(measured > 0) ||
        !std::isfinite(measured)) {
      error(line_no, measured_column,
            fmt::format("samples_per_second: expected a number > 0, got '{}'", cells[3]));
      continue;
    }
    if (cells[0].empty()) {
      error(line_no, 1, "case: a row needs a name");
      continue;
    }
    std::vector<std::string> overrides;
    bool eval = false;
    bool bad_flag = false;
    const int set_column = static_cast<int>(cells[0].size() + cells[1].size()) + 3;
    for (const auto& o : split(cells[2], ' ')) {
      if (o == kEvalFlag) {
        eval = true;
      } else if (o.starts_with("-")) {
        error(line_no, set_column,
              fmt::format("set: '{}' is not an override (key=value) nor {}", o, kEvalFlag));
        bad_flag = true;
      } else if (!o.empty()) {
        overrides.push_back(o);
      }
    }
    if (bad_flag) continue;
    const std::filesystem::path config = cells[1];
    const std::string config_path =
        config.is_absolute() || dir.empty() ? cells[1] : (dir / config).lexically_normal().string();
    LoadResult loaded = load_config_file(config_path, overrides);
    for (auto& [name, source] : loaded.sources) t.sources[name] = std::move(source);
    for (auto& d : loaded.diagnostics) t.diagnostics.push_back(std::move(d));
    if (!loaded.ok()) {
      t.diagnostics.push_back({Severity::kNote, path, line_no,
                               static_cast<int>(cells[0].size()) + 2,
                               fmt::format("case '{}' loads this config", cells[0])});
      continue;
    }
    t.entries.push_back({cells[0], std::move(*loaded.config), measured, eval});
  }
  if (!header)
    error(1, 1, fmt::format("the table is empty: it needs the header '{}' and rows", kHeader));
  else if (t.entries.empty() && t.ok())
    error(header_line, 1, "the table has its header but no rows: it needs a measured case");
  return t;
}

}  // namespace popkit::config
