// A fully specified generator (splitmix64, Box-Muller) so initial values are the same
// on every platform and standard library.
#include "engine/tensor/init.h"

#include <algorithm>
#include <cmath>

namespace popkit::engine {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform(std::uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

}  // namespace

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
    const double u1 = std::max(uniform(state), 1e-300);
    const double u2 = uniform(state);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    out[i] = static_cast<float>(mean + std * z);
  }
}

}  // namespace popkit::engine
