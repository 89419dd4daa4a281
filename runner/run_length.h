// How long a run trains: its limits (--steps/--epochs, else the config's training.steps
// and epochs, else one epoch), the step it stops at, and where a resumed checkpoint
// stands against them: past the end is refused, at the end there is nothing to train.
// A checkpoint's place in its data is checked against the schedule it claims, so one
// whose step its run could not have reached (forged, or of other data) is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "runner/checkpoint_metadata.h"
#include "runner/data_order.h"

namespace popkit::runner {

struct Limits {
  std::optional<std::int64_t> steps;
  std::optional<std::int64_t> epochs;
  bool from_options = false;  // --steps/--epochs, not the config
};

Limits limits_of(const config::Config& config, std::optional<std::int64_t> steps,
                 std::optional<std::int64_t> epochs);

// "--steps 10", "training.epochs 2", "1 epoch (the default)".
std::string describe(const Limits& limits, const config::Config& config);

// Steps at which the run will stop, counted from `step` at position `data`.
std::int64_t total_steps(const Limits& l, std::int64_t step, DataPosition data,
                         std::int64_t steps_per_epoch, std::int64_t global_batch);

// Whether the run resumed from checkpoint `state` (at `path`) has nothing left to train:
// the checkpoint is at its end. A limit below the checkpoint (steps count the whole run,
// so --steps 5 of a step-10 checkpoint would go back) throws InputRefused (exit 2).
bool resumed_at_end(const CheckpointState& state, const Limits& limits, const std::string& path,
                    const config::Config& config);

// The checkpoint was taken over this training set (n_train samples), in this order
// (`shuffle`, `shuffle_seed`: data.shuffle and training.seed), in global batches of
// `global_batch`, and its step is the one its epoch and position put it at:
//   step = epoch x floor(n_train / global_batch) + position / global_batch,
// position a whole number of global batches. Else InputRefused naming the fields.
void check_resumed_position(const CheckpointState& state, std::int64_t n_train,
                            std::int64_t global_batch, bool shuffle, std::uint64_t shuffle_seed,
                            const std::string& path);

}  // namespace popkit::runner
