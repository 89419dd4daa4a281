// Initial values keyed by a variable's name and the seed, from the engine's fully
// specified generator, so they are the same on every platform, R, mode and sharding.
#include "engine/tensor/init.h"

#include "engine/tensor/random.h"

namespace popkit::engine {

std::uint64_t name_key(std::string_view name, std::uint64_t seed) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;  // FNV prime
  }
  std::uint64_t state = h ^ seed;
  return splitmix64(state);
}

void fill_normal(float* out, std::int64_t n, double mean, double std, std::uint64_t key) {
  std::uint64_t state = key;
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(mean + std * standard_normal(state));
  }
}

}  // namespace popkit::engine
