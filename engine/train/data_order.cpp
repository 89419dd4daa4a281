#include "engine/train/data_order.h"

#include <numeric>
#include <utility>

namespace popkit::train {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound): rejection of the top partial range keeps every value equally likely.
std::uint64_t below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound);
  std::uint64_t x = splitmix64(state);
  while (x >= limit) x = splitmix64(state);
  return x % bound;
}

}  // namespace

std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                      bool shuffle) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  std::uint64_t state = seed ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(epoch + 1));
  splitmix64(state);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = below(state, static_cast<std::uint64_t>(i + 1));
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

}  // namespace popkit::train
