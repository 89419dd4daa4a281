// Initial values keyed by a variable's name: a weight's values depend only on its name,
// the seed and its element count, never on R, the execution mode or sharding, so every
// plan of one config starts from the same numbers.
#pragma once

#include <cstdint>
#include <string_view>

namespace popkit::engine {

// FNV-1a 64 of the name, mixed with the seed through splitmix64.
std::uint64_t name_key(std::string_view name, std::uint64_t seed);

// out[i] = mean + std * z_i, z_i standard normal from splitmix64 + Box-Muller (one
// normal per two uniforms) started at `key`.
void fill_normal(float* out, std::int64_t n, double mean, double std, std::uint64_t key);

}  // namespace popkit::engine
