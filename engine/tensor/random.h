// The engine's one random generator: splitmix64, with uniform, Box-Muller normal and
// unbiased bounded draws on top. Fully specified, so initial weights, synthetic data and
// shuffles are the same on every platform and standard library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace popkit::engine {

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 53 bits.
inline double uniform01(std::uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller, one value per two uniforms.
inline double standard_normal(std::uint64_t& state) {
  const double u1 = std::max(uniform01(state), 1e-300);
  const double u2 = uniform01(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Uniform in [0, bound): rejecting the top partial range keeps every value equally likely.
inline std::uint64_t uniform_below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound);
  std::uint64_t x = splitmix64(state);
  while (x >= limit) x = splitmix64(state);
  return x % bound;
}

}  // namespace popkit::engine
