// Configs built in code for the planner tests: the phased MNIST example of DESIGN.md
// and small variations, so tests do not depend on the YAML loader.
#pragma once

#include "config/config.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "tests/support/test_profile.h"

namespace popkit::planner::test {

// DESIGN.md's mnist-phased-rts: fc1..fc4 (fc2, fc3 identical), R=2, micro-batch 8,
// accumulation 4, sharding threshold 512 over everyone, weights and state remote.
inline config::Config mnist_phased() {
  config::Config c;
  c.name = "mnist-phased-rts";
  c.model.input_shape = {28, 28};
  using config::Activation;
  c.model.layers = {
      config::make_layer("fc1", "linear", {{"out_features", 512}, {"activation", "gelu"}}),
      config::make_layer("fc2", "linear", {{"out_features", 512}, {"activation", "gelu"}}),
      config::make_layer("fc3", "linear", {{"out_features", 512}, {"activation", "gelu"}}),
      config::make_layer("fc4", "linear", {{"out_features", 10}})};
  c.replication.factor = 2;
  c.replication.groupings = {{"everyone", 2, 1}};
  c.variables.grouping = "everyone";
  c.sharding.enabled = true;
  c.sharding.threshold = 512;
  c.sharding.grouping = "everyone";
  c.remote.weights = true;
  c.remote.optimizer_state = true;
  c.execution.mode = config::ExecutionMode::kPhased;
  c.execution.io_mode = config::IoMode::kIo;
  c.execution.io_tiles = 32;
  c.training.micro_batch_size = 8;
  c.training.gradient_accumulation = 4;
  c.training.optimizer.attributes.set("first_order_dtype", "float16");
  c.device.profile = "ipu-mk2";
  c.device.memory_per_replica = 900ull * 1024 * 1024;
  return ::popkit::test_support::with_test_profile(c);
}

// A tiny standard-mode model whose memory is easy to compute by hand: input [4],
// one layer 4 -> 3 without activation, R=1, micro-batch 2, accumulation 2.
inline config::Config tiny_standard() {
  config::Config c;
  c.name = "tiny";
  c.model.input_shape = {4};
  c.model.layers = {config::make_layer("fc", "linear", {{"out_features", 3}})};
  c.replication.factor = 1;
  c.execution.mode = config::ExecutionMode::kStandard;
  c.training.micro_batch_size = 2;
  c.training.gradient_accumulation = 2;
  c.device.profile = "cpu";
  return ::popkit::test_support::with_test_profile(c);
}

}  // namespace popkit::planner::test
