// A deep, narrow model for tests of how the planner and the engine scale with the number
// of layers: n linear layers of 16 (ReLU), the last one 4 classes, 4 x 4 inputs,
// replication 2 with every variable sharded over both replicas. Layer names have one
// length whatever n ("l00001"), so names do not grow with the model.
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "config/config.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "tests/support/test_profile.h"

namespace popkit::test {

// kPhased: weights and optimizer state remote, one phase per layer pass.
// kStandard: the optimizer state remote (the off-chip optimizer phase), weights on device.
inline config::Config deep_model(int n_layers, config::ExecutionMode mode,
                                 config::IoMode io_mode = config::IoMode::kIo) {
  config::Config c;
  c.name = "deep";
  c.model.input_shape = {4, 4};
  for (int i = 0; i < n_layers; ++i) {
    const bool last = i + 1 == n_layers;
    c.model.layers.push_back(config::make_layer(
        fmt::format("l{:05}", i + 1), "linear",
        {{"out_features", last ? 4 : 16}, {"activation", last ? "none" : "relu"}}));
  }
  c.replication.factor = 2;
  c.replication.groupings = {{"everyone", 2, 1}};
  c.variables.grouping = "everyone";
  c.sharding.enabled = true;
  c.sharding.threshold = 8;
  c.sharding.grouping = "everyone";
  c.remote.weights = mode == config::ExecutionMode::kPhased;
  c.remote.optimizer_state = true;
  c.execution.mode = mode;
  c.execution.io_mode = io_mode;
  c.execution.io_tiles = 32;
  c.training.micro_batch_size = 4;
  c.training.gradient_accumulation = 2;
  c.device.profile = "ipu-mk2";
  c.device.memory_per_replica = std::uint64_t{1} << 30;
  return ::popkit::test_support::with_test_profile(c);
}

}  // namespace popkit::test
