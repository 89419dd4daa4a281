#include "runner/data_order.h"

#include <numeric>
#include <utility>

#include "engine/tensor/random.h"

namespace popkit::runner {

using engine::splitmix64;

std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                      bool shuffle) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  std::uint64_t state = seed ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(epoch + 1));
  splitmix64(state);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = engine::uniform_below(state, static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[j]);
  }
  return order;
}

DataPosition advance(DataPosition p, std::int64_t n, std::int64_t global_batch_size) {
  p.position += global_batch_size;
  if (p.position + global_batch_size > n) {
    ++p.epoch;
    p.position = 0;
  }
  return p;
}

}  // namespace popkit::runner
