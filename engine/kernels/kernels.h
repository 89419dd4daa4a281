// The engine's hot loops, compiled once per x86-64 level (baseline SSE2, v2, v3 with AVX2
// and FMA, v4 with AVX-512) and chosen once at start-up from cpuid, so the portable build
// runs as fast as a `-march=native` one. A `native` build compiles one level, for its own
// CPU. POPKIT_CPU_LEVEL forces a level (for tests and comparisons); a level this CPU
// cannot run is an error, never a SIGILL.
//
// Each kind keeps its own table of kernels (engine/kernels/linear.h, layer_norm.h,
// adam.h, sgd.h: one struct, one per-level source); `Kernels` here is the level itself
// and the few loops every kind shares. Adding a kind adds its table and edits none.
//
// Results within one level depend on the values and shapes only (see layers.h); across
// levels they may differ in float rounding (FMA contracts a*b+c, packet widths change
// the order of Eigen's inner sums).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "popkit/kernel_levels.h"  // generated: POPKIT_KERNEL_LEVEL_IDS(X, ...), lowest first

namespace popkit::engine {

// One level's shared table: its name and what every kind may call.
struct Kernels {
  const char* level;         // "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4" or "native"
  const char* instructions;  // what the level adds, for --version: "AVX-512", ...
  // layers.h: the loss over rows of logits, and its gradient.
  float (*softmax_cross_entropy)(const float* logits, const float* labels, float* dlogits,
                                 std::int64_t n, std::int64_t classes);
  // Elementwise: x[i] /= d.
  void (*divide)(float* x, float d, std::int64_t n);
  // The collectives' reduction, one pass, no scratch: out[i] = ((x[0][o + i] + x[1][o + i])
  // + ...) / d for i in [0, n), terms in order; d == 1 divides nothing. `out` may be any
  // x[k] + o: each element is read from every term before it is written.
  void (*reduce)(float* out, const float* const* x, std::int64_t n_terms, std::int64_t o,
                 std::int64_t n, float d);
};

// Every level compiled into this binary, lowest first.
std::span<const Kernels* const> kernel_levels();
// Whether this CPU (and its operating system) runs a level's instructions.
bool runs_here(const Kernels& level);
// The level in use: POPKIT_CPU_LEVEL's when set (an unknown level, or one this CPU does
// not run, throws popkit::Error), else the highest this CPU runs. Chosen once.
const Kernels& kernels();
// For --version and the run file: "x86-64-v4 (AVX-512), chosen from cpuid" or
// "... , forced by POPKIT_CPU_LEVEL".
std::string kernels_in_use();
// The position of a level among kernel_levels().
std::size_t level_index(const Kernels& level);

// A kind's table at every level, lowest first as kernel_levels(): POPKIT_KERNEL_LEVELS
// specialises it beside the table's struct.
template <class Table>
struct KernelLevels;

// A kind's table at a level, and at the level in use.
template <class Table>
const Table& kernels_at(const Kernels& level) {
  return *KernelLevels<Table>::kTables[level_index(level)];
}
template <class Table>
const Table& kernels_of() {
  return kernels_at<Table>(kernels());
}

}  // namespace popkit::engine

// Declares the tables of one kind at every level of this build, after its struct, inside
// namespace popkit::engine: POPKIT_KERNEL_LEVELS(LinearKernels, linear). Each level's
// table is defined by the kind's per-level source, which the build compiles once per
// level (cmake/kernel_levels.cmake, popkit_kernel_table) as popkit_kernels_<name>_<level>.
#define POPKIT_KERNEL_DECLARE_(id, Type, name) extern "C" const Type popkit_kernels_##name##_##id;
#define POPKIT_KERNEL_ADDRESS_(id, Type, name) &popkit_kernels_##name##_##id,
#define POPKIT_KERNEL_LEVELS(Type, name)                              \
  POPKIT_KERNEL_LEVEL_IDS(POPKIT_KERNEL_DECLARE_, Type, name)         \
  template <>                                                         \
  struct KernelLevels<Type> {                                         \
    static constexpr const Type* kTables[] = {                        \
        POPKIT_KERNEL_LEVEL_IDS(POPKIT_KERNEL_ADDRESS_, Type, name)}; \
  }

namespace popkit::engine {
POPKIT_KERNEL_LEVELS(Kernels, shared);
}  // namespace popkit::engine
