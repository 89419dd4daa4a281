// The training set's global batches as the trainer feeds them, one step after another:
// an image dataset's samples in the epoch's order (engine::DatasetBatches), or a text's
// windows in that order, every window of an epoch shifted by the epoch's offset
// (engine::TextBatches, text_window_shift), so that over T epochs a run sees each part of
// the text at T positions. Either follows from (seed, epoch, position) alone, so a resumed
// run and R replicas x B against 1 x R B see the same batches.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "config/config.h"
#include "engine/data/batch_source.h"
#include "engine/data/text_dataset.h"
#include "planner/plan.h"

namespace popkit::runner {

class TrainBatches {
 public:
  // `train_set` is load_dataset's training split (for text, its windows: their count is
  // an epoch's); it must outlive this.
  TrainBatches(const config::Config& config, const engine::Dataset& train_set,
               const planner::Plan& plan);
  // The global batch of the samples (or windows) `samples` of epoch `epoch`.
  const engine::BatchSource& at(std::span<const std::int64_t> samples, std::int64_t epoch);

 private:
  std::optional<engine::DatasetBatches> images_;
  std::optional<engine::TextCorpus> text_;
  std::optional<engine::TextBatches> windows_;
  std::int64_t seq_ = 0;
  std::uint64_t seed_ = 0;
};

}  // namespace popkit::runner
