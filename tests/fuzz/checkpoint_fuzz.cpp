// libFuzzer target for checkpoints: the safetensors reader (engine/io/safetensors.h:
// parse_safetensors), then read_checkpoint's checks against a small model
// (runner/checkpoint.h: check_checkpoint, with the metadata checks of
// checkpoint_metadata.h) and, when they pass, the restore into an engine. Any bytes must
// end in a popkit::Error or a restored engine, never a crash, hang or sanitizer report.
// The checksum covers the metadata, so a mutated field would only ever fail it: each
// input is also checked with its checksum recomputed, to reach the field checks.
//
// kModel is the model the corpus was made for: two groups of one replica (so copies
// "NAME@group1" exist) and float16 first moments.
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "config/yaml/load.h"
#include "engine/engine.h"
#include "engine/io/safetensors.h"
#include "planner/build.h"
#include "runner/checkpoint.h"

namespace {

constexpr std::string_view kModel = R"(version: 1
name: fuzz
model:
  input_shape: [2, 2]
  layers:
    - {name: fc1, out_features: 3, activation: relu}
    - {name: fc2, out_features: 2}
  init: {weights: {normal: {mean: 0, std: 0.5}}, biases: zeros, seed: 1}
replication:
  factor: 2
  groupings:
    single: {group_size: 1, stride: 1}
variables: {grouping: single}
training:
  micro_batch_size: 2
  gradient_accumulation: 1
  optimizer: {type: adam, lr: 0.01, first_order_dtype: float16}
  seed: 3
data: {dataset: synthetic, synthetic_train: 16, synthetic_test: 8}
device: {profile: ipu-mk2, memory_per_replica: 1MiB}
)";

struct Model {
  popkit::planner::Plan plan;
  popkit::engine::Engine engine;
  explicit Model(const popkit::config::Config& config)
      : plan(popkit::planner::build_plan(config)), engine(plan, options()) {}
  static popkit::engine::EngineOptions options() {
    popkit::engine::EngineOptions o;
    o.n_threads = 1;
    return o;
  }
};

// POPKIT_FUZZ_VERBOSE=1 prints each input's outcome: to see what a corpus reaches.
bool verbose() {
  static const bool on = std::getenv("POPKIT_FUZZ_VERBOSE") != nullptr;
  return on;
}

Model& model() {
  static Model m([] {
    const auto loaded = popkit::config::load_config_string(kModel, "fuzz.yaml", {});
    POPKIT_ASSERT(loaded.config.has_value());
    return *loaded.config;
  }());
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace popkit;
  const std::string name = "fuzz.safetensors";
  Model& m = model();
  engine::SafeTensorsFile file;
  try {
    file = engine::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size),
                                     name);
  } catch (const Error& e) {
    if (verbose()) std::fprintf(stderr, "%s\n", e.what());
    return 0;
  }
  for (const bool restamp : {false, true}) {
    engine::SafeTensorsFile f = file;
    if (restamp) {
      if (!f.metadata.count("format")) continue;
      f.metadata["checksum"] = fmt::format("{:08x}", runner::checkpoint_checksum(f));
    }
    for (const runner::Restore what : {runner::Restore::kEverything, runner::Restore::kWeights}) {
      const char* how = what == runner::Restore::kEverything ? "resume" : "weights";
      const char* checksum = restamp ? "checksum recomputed" : "as written";
      try {
        const runner::LoadedCheckpoint loaded = runner::check_checkpoint(f, name, m.plan, what);
        runner::restore_checkpoint(m.engine, loaded, name, what);
        if (verbose()) std::fprintf(stderr, "[%s, %s] restored\n", checksum, how);
      } catch (const Error& e) {
        if (verbose()) std::fprintf(stderr, "[%s, %s] %s\n", checksum, how, e.what());
      }
    }
  }
  return 0;
}
