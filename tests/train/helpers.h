// What the train tests share: the tiny config (tests/train/data/tiny.yaml: 8x8 synthetic
// images, three layers, R = 2, phased, sharded, remote) with overrides, a fresh scratch
// folder per test, silent progress, and file helpers.
#pragma once

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "config/yaml/load.h"
#include "engine/io/safetensors.h"
#include "runner/checkpoint.h"
#include "runner/evaluate.h"
#include "runner/progress.h"
#include "runner/trainer.h"

namespace popkit::runner::testing {

namespace fs = std::filesystem;

// The message of the popkit::Error `f` throws, or "" when it does not throw.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const popkit::Error& e) {
    return e.what();
  }
  return "";
}

// The config file at `path` with `overrides`; fails the test when it does not load.
inline config::Config load_test_config(const std::string& path,
                                       const std::vector<std::string>& overrides) {
  auto result = config::load_config_file(path, overrides);
  if (!result.config) {
    std::ostringstream why;
    config::print_diagnostics(why, result.diagnostics, result.sources);
    BOOST_FAIL(path << " does not load: " << why.str());
  }
  return *result.config;
}

inline config::Config tiny_config(std::vector<std::string> overrides = {}) {
  // Noisier than the file's default, so the loss stays away from zero and every step moves
  // the weights.
  overrides.insert(overrides.begin(), "data.synthetic_noise=1.5");
  return load_test_config(std::string(POPKIT_SOURCE_DIR) + "/tests/train/data/tiny.yaml",
                          overrides);
}

// A scratch folder named after the running test, emptied first.
inline fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("popkit-train-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

inline std::vector<char> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Rewrites the checkpoint at `path` through `change`, with a checksum that fits again:
// what a buggy writer or a forger (not a damaged file) would leave.
template <typename F>
void rewrite_checkpoint(const std::string& path, F&& change) {
  auto file = engine::read_safetensors(path);
  change(file);
  file.metadata["checksum"] = fmt::format("{:08x}", checkpoint_checksum(file));
  engine::write_safetensors(path, file);
}

// Trains with progress and notes into `log`.
inline TrainResult run(const config::Config& config, TrainOptions options, const fs::path& dir,
                       std::ostream& log) {
  if (options.run_file.empty()) options.run_file = (dir / "run.json").string();
  options.n_threads = 2;
  Progress progress(log, ProgressStyle::kNone);
  return train(config, options, progress);
}

inline TrainResult run(const config::Config& config, TrainOptions options, const fs::path& dir) {
  std::ostringstream log;
  return run(config, std::move(options), dir, log);
}

}  // namespace popkit::runner::testing
