// The floating-point mode of the engine's threads: flush-to-zero and
// denormals-are-zero (MXCSR FTZ and DAZ), as TensorFlow's thread pools set them. A
// saturated softmax has subnormal gradients, and x86 computes on subnormals through a
// microcode assist many times slower than a normal operation; flushed, a converged model
// steps as fast as a new one. Numerically: a result below FLT_MIN (about 1.18e-38) is 0,
// and so is such an input. Every thread that runs engine arithmetic (the caller of
// train_step and evaluate, the pool's workers, the IO thread) runs in this mode, so the
// bitwise equivalences between thread counts and IO modes hold.
// POPKIT_FLUSH_DENORMALS=0 turns the mode off on every thread alike, to measure what it
// saves (bench/subnormal.sh); anything else, or unset, keeps it on. Also the engine's
// test for NaN and Inf in a tensor.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__SSE__) || defined(__x86_64__)
#include <immintrin.h>
#define POPKIT_HAS_MXCSR 1
#endif

namespace popkit::engine {

#if defined(POPKIT_HAS_MXCSR)
inline constexpr unsigned kFlushDenormalsBits = 0x8040u;  // FTZ (bit 15) | DAZ (bit 6)
#endif

// Whether the engine flushes: read once per process.
inline bool flush_denormals_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("POPKIT_FLUSH_DENORMALS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// Sets FTZ and DAZ on the calling thread, for good (the pool's own threads).
inline void flush_denormals_on_this_thread() {
#if defined(POPKIT_HAS_MXCSR)
  if (flush_denormals_enabled()) _mm_setcsr(_mm_getcsr() | kFlushDenormalsBits);
#endif
}

// Whether the calling thread flushes (for the tests).
inline bool denormals_flushed() {
#if defined(POPKIT_HAS_MXCSR)
  return (_mm_getcsr() & kFlushDenormalsBits) == kFlushDenormalsBits;
#else
  return false;
#endif
}

// Sets FTZ and DAZ for a scope on a thread that is not the engine's (the caller of
// train_step), and restores the caller's mode after it.
class FlushDenormals {
 public:
  FlushDenormals() {
#if defined(POPKIT_HAS_MXCSR)
    saved_ = _mm_getcsr();
    if (flush_denormals_enabled()) _mm_setcsr(saved_ | kFlushDenormalsBits);
#endif
  }
  ~FlushDenormals() {
#if defined(POPKIT_HAS_MXCSR)
    _mm_setcsr(saved_);
#endif
  }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  unsigned saved_ = 0;
};

// Whether some value is NaN or Inf: its exponent bits all ones. An integer OR over the
// whole tensor, which the compiler vectorises; std::isfinite with an early exit stays
// scalar, and was 6 % of a standard-mode step at micro-batch 8.
inline bool any_non_finite(const float* x, std::int64_t n) {
  constexpr std::uint32_t kExponent = 0x7f800000u;
  std::uint32_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, x + i, sizeof bits);
    bad |= static_cast<std::uint32_t>((bits & kExponent) == kExponent);
  }
  return bad != 0;
}

}  // namespace popkit::engine
