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

// Elements of shard `rank`, of `shard_size` elements each, that lie within a tensor of
// nelms: clamp(nelms - rank * shard_size, 0, shard_size). The rest of the shard is
// padding, which collectives neither send nor sum. Also a reduce-scatter's slice and an
// all-gather's piece (the engine's collectives and the cost model count with this).
[[nodiscard]] constexpr std::int64_t shard_extent(std::int64_t nelms, std::int64_t shard_size,
                                                  std::int64_t rank) {
  const std::int64_t left = nelms - rank * shard_size;
  return left <= 0 ? 0 : left < shard_size ? left : shard_size;
}

// Elements of the tensor held by rank k (the rest of its shard is padding).
[[nodiscard]] constexpr std::int64_t shard_valid_elements(std::int64_t nelms, std::int64_t n_shards,
                                                          std::int64_t k) {
  return shard_extent(nelms, shard_size(nelms, n_shards), k);
}

// The all_reduce chunk that the member of rank k owns, of n elements over G members:
// with n = q G + r, it starts at k q + min(k, r) and holds q + (k < r ? 1 : 0) elements,
// so chunks differ by one element at most and none is empty while n >= G. The engine's
// direct all_reduce cuts this way (engine/runtime/collectives.h), and the cost model
// counts its messages with it.
struct OwnerChunk {
  std::int64_t first = 0;
  std::int64_t n = 0;
};
[[nodiscard]] constexpr OwnerChunk owner_chunk(std::int64_t n, std::int64_t group_size,
                                               std::int64_t rank) {
  const std::int64_t q = n / group_size, r = n % group_size;
  return {rank * q + (rank < r ? rank : r), q + (rank < r ? 1 : 0)};
}

}  // namespace popkit::planner
