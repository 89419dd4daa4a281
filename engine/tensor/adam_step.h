// The Adam update's loops (popxl-addons semantics, see adam.h), header-only so that the
// kernels compiled for each x86-64 level (engine/kernels) carry their own copy.
#pragma once

#include <algorithm>
#include <cmath>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "engine/tensor/adam.h"

namespace popkit::engine::adam_detail {

// float16 <-> float32 of a block, rounding to nearest even (as Eigen::half does); with
// F16C eight at a time.
inline void to_float(const Eigen::half* h, float* f, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
#endif
  for (; i < n; ++i) f[i] = static_cast<float>(h[i]);
}
inline void to_half(const float* f, Eigen::half* h, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) h[i] = static_cast<Eigen::half>(f[i]);
}

// Plain loops the compiler vectorises (no branch inside; the bias corrections are
// per-step scalars).
inline void first_moment(const float* g, float* m, std::int64_t n, const AdamParams& p) {
  for (std::int64_t i = 0; i < n; ++i) m[i] = p.beta1 * m[i] + p.one_minus_beta1 * g[i];
}
inline void adam_update(float* w, const float* g, const float* m, float* v, std::int64_t n,
                        float c1, float c2, const AdamParams& p) {
  if (p.bias_correction) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float v_new = p.beta2 * v[i] + p.one_minus_beta2 * (g[i] * g[i]);
      v[i] = v_new;
      const float u = (m[i] / c1) / (std::sqrt(v_new / c2) + p.eps) + p.weight_decay * w[i];
      w[i] -= p.lr * u;
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const float v_new = p.beta2 * v[i] + p.one_minus_beta2 * (g[i] * g[i]);
      v[i] = v_new;
      const float u = m[i] / (std::sqrt(v_new) + p.eps) + p.weight_decay * w[i];
      w[i] -= p.lr * u;
    }
  }
}

// 1 - b^t in double, rounded once: the correction is a per-step scalar.
inline float correction(bool on, double beta, std::int64_t t) {
  return on ? static_cast<float>(1.0 - std::pow(beta, static_cast<double>(t))) : 1.0f;
}

}  // namespace popkit::engine::adam_detail

namespace popkit::engine {

inline void adam_step(float* w, const float* g, float* m, float* v, std::int64_t n, std::int64_t t,
                      const AdamParams& p) {
  const float c1 = adam_detail::correction(p.bias_correction, p.beta1_exact, t);
  const float c2 = adam_detail::correction(p.bias_correction, p.beta2_exact, t);
  // In blocks that stay in L1, so the update reads g and the new m from there rather
  // than from memory a second time (the same operations on each element).
  constexpr std::int64_t kBlock = 1024;
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::int64_t k = std::min(kBlock, n - i0);
    adam_detail::first_moment(g + i0, m + i0, k, p);
    adam_detail::adam_update(w + i0, g + i0, m + i0, v + i0, k, c1, c2, p);
  }
}

inline void adam_step(float* w, const float* g, Eigen::half* m, float* v, std::int64_t n,
                      std::int64_t t, const AdamParams& p) {
  const float c1 = adam_detail::correction(p.bias_correction, p.beta1_exact, t);
  const float c2 = adam_detail::correction(p.bias_correction, p.beta2_exact, t);
  // In blocks that stay in L1: m to float, its update, rounded to float16 and stored,
  // then the update of w with the rounded value read back.
  constexpr std::int64_t kBlock = 512;
  float mf[kBlock];
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::int64_t k = std::min(kBlock, n - i0);
    adam_detail::to_float(m + i0, mf, k);
    adam_detail::first_moment(g + i0, mf, k, p);
    adam_detail::to_half(mf, m + i0, k);
    adam_detail::to_float(m + i0, mf, k);
    adam_detail::adam_update(w + i0, g + i0, mf, v + i0, k, c1, c2, p);
  }
}

}  // namespace popkit::engine
