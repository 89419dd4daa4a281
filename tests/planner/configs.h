// Configs built in code for the planner tests: the phased MNIST example of DESIGN.md
// and small variations, so tests do not depend on the YAML loader.
#pragma once

#include <string>

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

// A GPT-2-shaped language model (DESIGN.md "Models"): a token + position embedding of
// `vocabulary` tokens, `positions` rows and `width` features, `blocks` decoder blocks of
// `heads` heads and a 4 x width MLP, a final layer norm and a head tied to the embedding
// (or not), on byte-level text of `sequence` tokens; standard mode, R=1, micro-batch 2.
struct GptShape {
  std::int64_t vocabulary = 256, positions = 16, width = 32, blocks = 2, heads = 4;
  std::int64_t sequence = 16;
  bool tied = true;
};
inline config::Config gpt(const GptShape& s = {}) {
  config::Config c;
  c.name = "gpt";
  c.model.input_shape = {s.sequence};
  c.model.layers.push_back(config::make_layer(
      "wte", "embedding",
      {{"vocabulary", s.vocabulary}, {"positions", s.positions}, {"width", s.width}}));
  for (std::int64_t i = 0; i < s.blocks; ++i)
    c.model.layers.push_back(config::make_layer("h" + std::to_string(i), "decoder_block",
                                                {{"heads", s.heads}, {"hidden", 4 * s.width}}));
  c.model.layers.push_back(config::make_layer("ln_f", "layer_norm"));
  c.model.layers.push_back(config::make_layer(
      "head", "lm_head",
      {{"vocabulary", s.vocabulary}, {"tied_to", std::string(s.tied ? "wte" : "")}}));
  c.replication.factor = 1;
  c.execution.mode = config::ExecutionMode::kStandard;
  c.training.micro_batch_size = 2;
  c.data.dataset = config::Dataset::kText;
  c.data.path = "text.txt";
  c.data.sequence_length = s.sequence;
  c.device.profile = "cpu";
  return ::popkit::test_support::with_test_profile(c);
}

}  // namespace popkit::planner::test
