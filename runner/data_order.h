// The order in which training visits its samples: epoch after epoch, each a permutation
// of the training set made from (seed, epoch) alone, so a run resumed at any step sees
// exactly the samples an uninterrupted run would. A global batch is
// micro_batch × accumulation × replicas consecutive samples of the order; the samples
// past the last full global batch of an epoch are dropped.
#pragma once

#include <cstdint>
#include <vector>

namespace popkit::runner {

// Where training stands in the data; stored in a checkpoint's metadata.
struct DataPosition {
  std::int64_t epoch = 0;     // 0-based
  std::int64_t position = 0;  // samples of this epoch's order already consumed
};

// How epoch_order shuffles, as a checkpoint records it: a resumed run must shuffle the
// same way to see the samples an uninterrupted run would.
inline constexpr const char* kShuffleRng = "splitmix64 Fisher-Yates of (shuffle_seed, epoch)";

// The permutation of 0..n-1 for `epoch`: Fisher-Yates driven by splitmix64 seeded from
// (seed, epoch), with bounded draws by rejection, so it is the same on every platform
// and standard library. Without shuffle, the identity.
std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                      bool shuffle);

// Global batches per epoch: floor(n / global_batch_size).
[[nodiscard]] constexpr std::int64_t batches_per_epoch(std::int64_t n,
                                                       std::int64_t global_batch_size) {
  return n / global_batch_size;
}

// After a step consumed a global batch at `p`: moves on, and to the next epoch when what
// is left of this one does not fill a global batch, so a position is always canonical.
DataPosition advance(DataPosition p, std::int64_t n, std::int64_t global_batch_size);

}  // namespace popkit::runner
