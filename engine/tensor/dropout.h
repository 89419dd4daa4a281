// Inverted dropout (the PopXL seed rule, made per sample): y = x * keep / (1 - rate),
// keep ~ Bernoulli(1 - rate) per element. The mask of a sample depends only on
// (training.seed, optimizer step, the sample's index in the global batch, layer), so
// phased or standard, any io mode, sharding, resume, and R replicas x micro-batch B
// against one replica x R*B all draw the same masks. Backward applies the same mask to
// dy (dx = dy * keep / (1 - rate)); the mask is drawn again, never stored.
#pragma once

#include <cstdint>

#include "engine/tensor/random.h"

namespace popkit::engine {

// The key of one sample's mask at one layer in one optimizer step.
inline std::uint64_t dropout_key(std::uint64_t seed, std::int64_t step, std::int64_t sample,
                                 std::int64_t layer) {
  std::uint64_t state = seed;
  std::uint64_t key = splitmix64(state);
  for (const std::int64_t part : {step, sample, layer}) {
    state = key ^ static_cast<std::uint64_t>(part);
    key = splitmix64(state);
  }
  return key;
}

// Element j of a sample keyed `key` is kept iff its 24-bit uniform draw is at least
// rate * 2^24: exactly representable, so the keep probability is 1 - rate to 2^-24.
inline bool dropout_keeps(std::uint64_t key, std::int64_t j, std::uint32_t threshold) {
  std::uint64_t state = key + static_cast<std::uint64_t>(j);
  return static_cast<std::uint32_t>(splitmix64(state) >> 40) >= threshold;
}

inline std::uint32_t dropout_threshold(double rate) {
  return static_cast<std::uint32_t>(rate * 16777216.0);
}

// The key of one of a layer's dropout sites when it drops in several places (a decoder
// block: its attention's probabilities and its two residual branches), from the sample's
// key: each site's mask is drawn apart from the others'.
inline std::uint64_t dropout_site_key(std::uint64_t key, std::uint64_t site) {
  std::uint64_t state = key ^ site;
  return splitmix64(state);
}

// y[i, :] = x[i, :] * keep / (1 - rate) for n rows of `width`, row i's mask keyed keys[i].
// y may be x.
inline void dropout_keyed_rows(const float* x, float* y, std::int64_t n, std::int64_t width,
                               double rate, const std::uint64_t* keys) {
  const std::uint32_t threshold = dropout_threshold(rate);
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  for (std::int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * width;
    float* yi = y + i * width;
    for (std::int64_t j = 0; j < width; ++j)
      yi[j] = dropout_keeps(keys[i], j, threshold) ? xi[j] * scale : 0.0f;
  }
}

// y[i, :] = x[i, :] * keep / (1 - rate) for n rows of `width`, row i being sample
// first_sample + i of the global batch. y may be x.
inline void dropout_rows(const float* x, float* y, std::int64_t n, std::int64_t width, double rate,
                         std::uint64_t seed, std::int64_t step, std::int64_t first_sample,
                         std::int64_t layer) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t key = dropout_key(seed, step, first_sample + i, layer);
    dropout_keyed_rows(x + i * width, y + i * width, 1, width, rate, &key);
  }
}

}  // namespace popkit::engine
