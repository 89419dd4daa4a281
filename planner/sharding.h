// Replicated tensor sharding (RTS) arithmetic: how a flat tensor of nelms elements is
// split over the S members of a sharding group. PopXL keeps the full shape as the
// tensor's meta shape; every replica holds one flat shard of the same size.
#pragma once

#include <cstdint>

namespace popkit::planner {

// shard_size = ceil(nelms / S)
[[nodiscard]] constexpr std::int64_t shard_size(std::int64_t nelms, std::int64_t n_shards) {
  return (nelms + n_shards - 1) / n_shards;
}

// padding = S * shard_size - nelms: the zeros at the tail of the last ranks' shards.
[[nodiscard]] constexpr std::int64_t shard_padding(std::int64_t nelms, std::int64_t n_shards) {
  return n_shards * shard_size(nelms, n_shards) - nelms;
}

// Elements of the tensor held by rank k (the rest of its shard is padding).
[[nodiscard]] constexpr std::int64_t shard_valid_elements(std::int64_t nelms, std::int64_t n_shards,
                                                          std::int64_t k) {
  const std::int64_t n = shard_size(nelms, n_shards);
  const std::int64_t begin = k * n;
  if (begin >= nelms) return 0;
  return nelms - begin < n ? nelms - begin : n;
}

}  // namespace popkit::planner
