// One level's shared table (kernels.h): its name, what it adds, and the loops every kind
// may call; compiled once per level by popkit_kernel_table (cmake/kernel_levels.cmake).
#include "engine/kernels/kernels.h"
#include "engine/tensor/layers.h"

#ifndef POPKIT_KERNEL_SYMBOL
#error "POPKIT_KERNEL_SYMBOL names this level's table (set by cmake/kernel_levels.cmake)"
#endif
#ifndef POPKIT_KERNEL_LEVEL
#error "POPKIT_KERNEL_LEVEL names this level (set by cmake/kernel_levels.cmake)"
#endif

namespace popkit::engine {
namespace {

float loss(const float* logits, const float* labels, float* dlogits, std::int64_t n,
           std::int64_t classes) {
  return softmax_cross_entropy<float>(logits, labels, dlogits, n, classes);
}
void divide(float* x, float d, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] /= d;
}
// In blocks of kB elements held in registers: every term of a block is read before the
// block is written, so `out` may alias a term.
void reduce(float* out, const float* const* x, std::int64_t n_terms, std::int64_t o, std::int64_t n,
            float d) {
  constexpr std::int64_t kB = 32;
  std::int64_t i0 = 0;
  for (; i0 + kB <= n; i0 += kB) {
    float acc[kB];
    for (std::int64_t i = 0; i < kB; ++i) acc[i] = x[0][o + i0 + i];
    for (std::int64_t k = 1; k < n_terms; ++k)
      for (std::int64_t i = 0; i < kB; ++i) acc[i] += x[k][o + i0 + i];
    if (d != 1.0f)
      for (std::int64_t i = 0; i < kB; ++i) acc[i] /= d;
    for (std::int64_t i = 0; i < kB; ++i) out[i0 + i] = acc[i];
  }
  for (; i0 < n; ++i0) {
    float acc = x[0][o + i0];
    for (std::int64_t k = 1; k < n_terms; ++k) acc += x[k][o + i0];
    out[i0] = d != 1.0f ? acc / d : acc;
  }
}

}  // namespace
}  // namespace popkit::engine

// The level's description, from the macros the compiler defines for its -march.
#if defined(__AVX512F__)
#define POPKIT_KERNEL_INSTRUCTIONS "AVX-512"
#elif defined(__AVX2__) && defined(__FMA__)
#define POPKIT_KERNEL_INSTRUCTIONS "AVX2, FMA"
#elif defined(__SSE4_2__)
#define POPKIT_KERNEL_INSTRUCTIONS "SSE4.2"
#else
#define POPKIT_KERNEL_INSTRUCTIONS "SSE2"
#endif

namespace popkit::engine {

extern "C" const Kernels POPKIT_KERNEL_SYMBOL = {
    .level = POPKIT_KERNEL_LEVEL,
    .instructions = POPKIT_KERNEL_INSTRUCTIONS,
    .softmax_cross_entropy = &loss,
    .divide = &divide,
    .reduce = &reduce,
};

}  // namespace popkit::engine
