// What the host feeds the engine: for replica r and accumulation step s of the current
// global batch, the micro-batch's pixels (uint8, normalised by the engine on the fly)
// and labels. DatasetBatches serves a global batch of a Dataset laid out as PopXL's
// host arrays are, [A, R, B, ...]: replica r at step s gets samples (s R + r) B + i.
// EvalBatches serves a test set to an evaluation plan, each replica its own share.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/data/dataset.h"

namespace popkit::engine {

// What a host_load of images does with them: x = (pixel / 255 - mean) / std
// (config.data normalisation), for training and evaluation.
void normalize_pixels(const std::uint8_t* pixels, std::size_t n, double mean, double std, float* x);

struct MicroBatch {
  std::span<const std::uint8_t> pixels;  // size * image_size bytes, image after image
  std::span<const std::uint8_t> labels;  // size * the dataset's label_width class ids
  std::int64_t size = 0;                 // samples
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Called concurrently from several threads; must not modify shared state.
  [[nodiscard]] virtual MicroBatch micro_batch(std::int64_t replica, std::int64_t step) const = 0;
};

class DatasetBatches final : public BatchSource {
 public:
  DatasetBatches(const Dataset& data, std::int64_t replicas, std::int64_t accumulation,
                 std::int64_t micro_batch_size);

  // Samples of the global batch: replicas * accumulation * micro_batch_size indices.
  void set_batch(std::span<const std::int64_t> samples);
  // The global batch `index` of `order` (consecutive slices of it).
  void set_batch(const std::vector<std::int64_t>& order, std::int64_t index);

  [[nodiscard]] std::int64_t global_batch_size() const {
    return replicas_ * accumulation_ * micro_;
  }
  [[nodiscard]] MicroBatch micro_batch(std::int64_t replica, std::int64_t step) const override;

 private:
  const Dataset* data_;
  std::int64_t replicas_, accumulation_, micro_;
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
};

// The test set as an evaluation plan reads it: replica r evaluates the contiguous share
// [n r / R, n (r + 1) / R) of the n samples; batch b gives it, at repeat step s, the
// share's samples (b A + s) B + i. Past the share's end a micro-batch is padded with
// zero images (label 0): the plan's shapes are fixed, and the host scores only the
// `valid` rows.
class EvalBatches final : public BatchSource {
 public:
  EvalBatches(const Dataset& data, std::int64_t replicas, std::int64_t steps,
              std::int64_t micro_batch_size);

  // Batches to cover the largest share: ceil(ceil(n / R) / (A B)).
  [[nodiscard]] std::int64_t n_batches() const;
  void set_batch(std::int64_t index);
  // Rows of (replica, step) in the current batch that are samples, not padding.
  [[nodiscard]] std::int64_t valid(std::int64_t replica, std::int64_t step) const;
  [[nodiscard]] MicroBatch micro_batch(std::int64_t replica, std::int64_t step) const override;

 private:
  [[nodiscard]] std::int64_t share_begin(std::int64_t replica) const;
  const Dataset* data_;
  std::int64_t replicas_, steps_, micro_;
  std::int64_t batch_ = 0;
  std::vector<std::uint8_t> pixels_;  // [R, A, B, image]
  std::vector<std::uint8_t> labels_;  // [R, A, B]
};

}  // namespace popkit::engine
