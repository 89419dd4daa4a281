// The training set's global batches (train_batches.h).
#include "runner/train_batches.h"

#include "engine/data/dataset.h"

namespace popkit::runner {

TrainBatches::TrainBatches(const config::Config& config, const engine::Dataset& train_set,
                           const planner::Plan& plan)
    : seq_(config.data.sequence_length), seed_(config.training.seed) {
  const std::int64_t R = plan.replication_factor, A = plan.gradient_accumulation,
                     B = plan.micro_batch_size;
  if (config.data.dataset != config::Dataset::kText) {
    images_.emplace(train_set, R, A, B);
    return;
  }
  text_ = engine::read_text(engine::text_path(config.data), seq_, config.data.validation_fraction);
  windows_.emplace(text_->split(engine::Split::kTrain), seq_, R, A, B);
}

const engine::BatchSource& TrainBatches::at(std::span<const std::int64_t> samples,
                                            std::int64_t epoch) {
  if (images_) {
    images_->set_batch(samples);
    return *images_;
  }
  windows_->set_batch(samples, engine::text_window_shift(text_->n_train, seq_, seed_, epoch));
  return *windows_;
}

}  // namespace popkit::runner
