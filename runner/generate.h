// `poprun generate`: text sampled from a trained language model's checkpoint. Each new
// byte comes from the evaluation plan's logits at the prompt's last position (the
// last `positions` bytes of it): greedy at temperature 0, else drawn from
// softmax(logits / T) by a generator seeded by the seed, so a seed gives one text.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "engine/data/dataset.h"
#include "engine/engine.h"

namespace popkit::runner {

struct Sampling {
  double temperature = 1.0;  // 0: greedy (the largest logit, the first of equal ones)
  std::uint64_t seed = 0;
};

// The evaluation plan's input for a context: its last `positions` bytes, padded with
// zeros after them (attention is causal, so the padding never reaches a context byte's
// logits); its labels 0.
engine::Dataset generation_window(std::span<const std::uint8_t> context, std::int64_t positions);

// The byte drawn from one position's logits (n_classes of them) with uniform draw `u` in
// [0, 1); greedy when the temperature is 0.
std::uint8_t sample_byte(std::span<const float> logits, double temperature, double u);

// `tokens` bytes continuing `prompt` on an engine of a text config's evaluation plan with
// the weights loaded.
std::string generate_bytes(engine::Engine& engine, std::string_view prompt, std::int64_t tokens,
                           const Sampling& sampling);

struct GenerateCommand {
  std::string checkpoint;  // a checkpoint beside its run's config.yaml, or a run folder
  std::string prompt;
  std::int64_t tokens = 0;
  Sampling sampling;
  std::string output;  // "" = none; else the prompt and continuation, raw bytes
  int n_threads = 0;
};

// Prints the prompt and its continuation, non-printable bytes escaped (\xHH). Returns 0,
// or 2 for bad input (no checkpoint or config, an invalid config, a non-text config).
int run_generate_command(const GenerateCommand& command, std::ostream& out, std::ostream& err);

// The bytes as text: printable ASCII, newline and tab as they are, a backslash as \\,
// any other byte \xHH.
std::string escape_bytes(std::string_view bytes);

}  // namespace popkit::runner
