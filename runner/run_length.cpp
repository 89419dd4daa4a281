// A run's limits, and a resumed checkpoint's place against them. See run_length.h.
#include "runner/run_length.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "runner/agreement.h"

namespace popkit::runner {

Limits limits_of(const config::Config& config, std::optional<std::int64_t> steps,
                 std::optional<std::int64_t> epochs) {
  if (steps || epochs) return {steps, epochs, true};
  Limits l{config.training.steps, config.training.epochs, false};
  if (!l.steps && !l.epochs) l.epochs = 1;
  return l;
}

std::string describe(const Limits& l, const config::Config& config) {
  std::vector<std::string> parts;
  const char* prefix = l.from_options ? "--" : "training.";
  if (l.steps) parts.push_back(fmt::format("{}steps {}", prefix, *l.steps));
  if (l.epochs)
    parts.push_back(!l.from_options && !config.training.epochs && !config.training.steps
                        ? std::string("1 epoch (the default)")
                        : fmt::format("{}epochs {}", prefix, *l.epochs));
  return fmt::format("{}", fmt::join(parts, " and "));
}

std::int64_t total_steps(const Limits& l, std::int64_t step, DataPosition data,
                         std::int64_t steps_per_epoch, std::int64_t global_batch) {
  std::int64_t total = std::numeric_limits<std::int64_t>::max();
  if (l.epochs) {
    // Saturating: --epochs near 2^63 runs until stopped; it does not wrap around.
    std::int64_t epoch_steps = 0, end = 0;
    const bool overflow =
        __builtin_mul_overflow(*l.epochs - data.epoch, steps_per_epoch, &epoch_steps) ||
        __builtin_add_overflow(
            step, std::max<std::int64_t>(0, epoch_steps - data.position / global_batch), &end);
    if (!overflow) total = end;
  }
  if (l.steps) total = std::min(total, *l.steps);
  return std::max(total, step);
}

bool resumed_at_end(const CheckpointState& s, const Limits& limits, const std::string& path,
                    const config::Config& config) {
  const std::string more =
      "steps and epochs count the whole run, a resumed one too: give more to train on";
  if (limits.steps && *limits.steps < s.step)
    throw InputRefused("{} is at step {}, past this run's end ({}): {}", path, s.step,
                       describe(limits, config), more);
  // Epoch e (0-based) at position 0 has done e epochs; inside it, e and a part.
  if (limits.epochs &&
      (s.data.epoch > *limits.epochs || (s.data.epoch == *limits.epochs && s.data.position > 0)))
    throw InputRefused("{} is {} epoch {}, past this run's end ({}): {}", path,
                       s.data.position > 0 ? "inside" : "at the start of", s.data.epoch + 1,
                       describe(limits, config), more);
  const std::int64_t per_epoch = s.n_train / s.global_batch_size;
  return total_steps(limits, s.step, s.data, per_epoch, s.global_batch_size) == s.step;
}

void check_resumed_position(const CheckpointState& s, std::int64_t n_train,
                            std::int64_t global_batch, bool shuffle, std::uint64_t shuffle_seed,
                            const std::string& path) {
  if (s.shuffle != shuffle || (shuffle && s.shuffle_seed != shuffle_seed))
    throw InputRefused(
        "{}: its metadata says the samples were {}, but the config it was written under says "
        "{}: the order of the samples would not be its run's",
        path, s.shuffle ? fmt::format("shuffled with seed {}", s.shuffle_seed) : "not shuffled",
        shuffle ? fmt::format("shuffled with seed {} (data.shuffle, training.seed)", shuffle_seed)
                : "not shuffled (data.shuffle)");
  if (s.n_train != n_train)
    throw InputRefused(
        "{} was taken over {} training samples, but this dataset has {}: the order of the "
        "samples would not be its run's; resume on the data it was trained on",
        path, s.n_train, n_train);
  if (s.global_batch_size != global_batch)
    throw InputRefused(
        "{} was taken in global batches of {}, this run's are {}: its data position would not "
        "be its run's",
        path, s.global_batch_size, global_batch);
  const std::int64_t per_epoch = n_train / global_batch;
  std::int64_t expected = 0;
  const bool whole = s.data.position % global_batch == 0;
  const bool overflow = __builtin_mul_overflow(s.data.epoch, per_epoch, &expected) ||
                        __builtin_add_overflow(expected, s.data.position / global_batch, &expected);
  if (whole && !overflow && expected == s.step) return;
  throw InputRefused(
      "{}: its metadata says step {} at epoch {}, sample {} of the epoch, but a run of {} global "
      "batches of {} an epoch {}: no run of this data and batch wrote it",
      path, s.step, s.data.epoch + 1, s.data.position, per_epoch, global_batch,
      whole && !overflow ? fmt::format("is there at step {}", expected)
                         : std::string("never stands there"));
}

}  // namespace popkit::runner
