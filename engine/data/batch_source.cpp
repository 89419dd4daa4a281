// Global batches gathered from a dataset into [A, R, B] order, and the test set's
// shares for evaluation.
#include "engine/data/batch_source.h"

#include <algorithm>

#include "base/error.h"

namespace popkit::engine {

void normalize_pixels(const std::uint8_t* pixels, std::size_t n, double mean, double std,
                      float* x) {
  const auto m = static_cast<float>(mean);
  const auto s = static_cast<float>(std);
  for (std::size_t i = 0; i < n; ++i) x[i] = (static_cast<float>(pixels[i]) / 255.0f - m) / s;
}

DatasetBatches::DatasetBatches(const Dataset& data, std::int64_t replicas,
                               std::int64_t accumulation, std::int64_t micro_batch_size)
    : data_(&data), replicas_(replicas), accumulation_(accumulation), micro_(micro_batch_size) {}

void DatasetBatches::set_batch(std::span<const std::int64_t> samples) {
  if (static_cast<std::int64_t>(samples.size()) != global_batch_size())
    throw Error("a global batch needs {} samples ({} replicas x {} steps x {}), got {}",
                global_batch_size(), replicas_, accumulation_, micro_, samples.size());
  const auto size = static_cast<std::size_t>(data_->image_size());
  const auto width = static_cast<std::size_t>(data_->label_width);
  pixels_.resize(samples.size() * size);
  labels_.resize(samples.size() * width);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::int64_t k = samples[i];
    if (k < 0 || k >= data_->n)
      throw Error("sample {} is out of range: the dataset has {}", k, data_->n);
    std::copy_n(data_->image(k), size, pixels_.begin() + static_cast<std::ptrdiff_t>(i * size));
    std::copy_n(data_->label(k), width, labels_.begin() + static_cast<std::ptrdiff_t>(i * width));
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

namespace {

// Rows [first, first + micro) of gathered pixels and labels (the dataset's image_size
// and label_width a row).
MicroBatch rows(const std::vector<std::uint8_t>& pixels, const std::vector<std::uint8_t>& labels,
                std::int64_t first, std::int64_t micro, const Dataset& data) {
  const auto at = static_cast<std::size_t>(first);
  const auto n = static_cast<std::size_t>(micro);
  const auto size = static_cast<std::size_t>(data.image_size());
  const auto width = static_cast<std::size_t>(data.label_width);
  MicroBatch mb;
  mb.size = micro;
  mb.pixels = std::span<const std::uint8_t>(pixels).subspan(at * size, n * size);
  mb.labels = std::span<const std::uint8_t>(labels).subspan(at * width, n * width);
  return mb;
}

}  // namespace

MicroBatch DatasetBatches::micro_batch(std::int64_t replica, std::int64_t step) const {
  // sample = (s * R + r) * B + i
  return rows(pixels_, labels_, (step * replicas_ + replica) * micro_, micro_, *data_);
}

EvalBatches::EvalBatches(const Dataset& data, std::int64_t replicas, std::int64_t steps,
                         std::int64_t micro_batch_size)
    : data_(&data), replicas_(replicas), steps_(steps), micro_(micro_batch_size) {
  if (replicas < 1 || steps < 1 || micro_batch_size < 1)
    throw Error("evaluation batches of {} replicas x {} steps x {} samples", replicas, steps,
                micro_batch_size);
  const auto rows = static_cast<std::size_t>(replicas * steps * micro_batch_size);
  pixels_.resize(rows * static_cast<std::size_t>(data.image_size()));
  labels_.resize(rows * static_cast<std::size_t>(data.label_width));
}

std::int64_t EvalBatches::share_begin(std::int64_t replica) const {
  return data_->n * replica / replicas_;
}

std::int64_t EvalBatches::n_batches() const {
  const std::int64_t largest = (data_->n + replicas_ - 1) / replicas_;
  const std::int64_t per_batch = steps_ * micro_;
  return (largest + per_batch - 1) / per_batch;
}

std::int64_t EvalBatches::valid(std::int64_t replica, std::int64_t step) const {
  const std::int64_t share = share_begin(replica + 1) - share_begin(replica);
  const std::int64_t first = (batch_ * steps_ + step) * micro_;
  return std::clamp<std::int64_t>(share - first, 0, micro_);
}

void EvalBatches::set_batch(std::int64_t index) {
  if (index < 0 || index >= n_batches())
    throw Error("evaluation batch {} out of range ({} batches)", index, n_batches());
  batch_ = index;
  const auto size = static_cast<std::size_t>(data_->image_size());
  const auto width = static_cast<std::size_t>(data_->label_width);
  std::size_t row = 0;
  for (std::int64_t r = 0; r < replicas_; ++r) {
    for (std::int64_t s = 0; s < steps_; ++s) {
      const std::int64_t n = valid(r, s);
      const std::int64_t first = share_begin(r) + (batch_ * steps_ + s) * micro_;
      for (std::int64_t i = 0; i < micro_; ++i, ++row) {
        auto dst = pixels_.begin() + static_cast<std::ptrdiff_t>(row * size);
        auto labels = labels_.begin() + static_cast<std::ptrdiff_t>(row * width);
        if (i < n) {
          std::copy_n(data_->image(first + i), size, dst);
          std::copy_n(data_->label(first + i), width, labels);
        } else {
          std::fill_n(dst, size, std::uint8_t{0});
          std::fill_n(labels, width, std::uint8_t{0});
        }
      }
    }
  }
}

MicroBatch EvalBatches::micro_batch(std::int64_t replica, std::int64_t step) const {
  return rows(pixels_, labels_, (replica * steps_ + step) * micro_, micro_, *data_);
}

}  // namespace popkit::engine
