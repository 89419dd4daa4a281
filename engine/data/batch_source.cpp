// Global batches gathered from a dataset into [A, R, B] order.
#include "engine/data/batch_source.h"

#include <algorithm>

#include "config/error.h"

namespace popkit::engine {

DatasetBatches::DatasetBatches(const Dataset& data, std::int64_t replicas,
                               std::int64_t accumulation, std::int64_t micro_batch_size)
    : data_(&data), replicas_(replicas), accumulation_(accumulation), micro_(micro_batch_size) {}

void DatasetBatches::set_batch(std::span<const std::int64_t> samples) {
  if (static_cast<std::int64_t>(samples.size()) != global_batch_size())
    throw Error("a global batch needs {} samples ({} replicas x {} steps x {}), got {}",
                global_batch_size(), replicas_, accumulation_, micro_, samples.size());
  const auto size = static_cast<std::size_t>(data_->image_size());
  pixels_.resize(samples.size() * size);
  labels_.resize(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::int64_t k = samples[i];
    if (k < 0 || k >= data_->n)
      throw Error("sample {} is out of range: the dataset has {}", k, data_->n);
    std::copy_n(data_->image(k), size, pixels_.begin() + static_cast<std::ptrdiff_t>(i * size));
    labels_[i] = data_->labels[static_cast<std::size_t>(k)];
  }
}

void DatasetBatches::set_batch(const std::vector<std::int64_t>& order, std::int64_t index) {
  const std::int64_t g = global_batch_size();
  if ((index + 1) * g > static_cast<std::int64_t>(order.size()))
    throw Error("global batch {} needs samples up to {}, the order has {}", index, (index + 1) * g,
                order.size());
  set_batch(std::span<const std::int64_t>(order).subspan(static_cast<std::size_t>(index * g),
                                                         static_cast<std::size_t>(g)));
}

MicroBatch DatasetBatches::micro_batch(std::int64_t replica, std::int64_t step) const {
  // sample = (s * R + r) * B + i
  const auto first = static_cast<std::size_t>((step * replicas_ + replica) * micro_);
  const auto size = static_cast<std::size_t>(data_->image_size());
  MicroBatch mb;
  mb.size = micro_;
  mb.pixels = std::span<const std::uint8_t>(pixels_).subspan(
      first * size, static_cast<std::size_t>(micro_) * size);
  mb.labels =
      std::span<const std::uint8_t>(labels_).subspan(first, static_cast<std::size_t>(micro_));
  return mb;
}

}  // namespace popkit::engine
