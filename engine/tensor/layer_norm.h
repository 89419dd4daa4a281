// Layer normalisation over a row's C features (torch.nn.LayerNorm(C) with its affine
// scale and shift), forward and backward, on float. Plain inline functions, so that they
// compile once per x86-64 level as layers.h does.
//
// Rows of x [n, C]; a row's statistics are summed in double in feature order, and a
// parameter's gradient in row order, so results depend on the values and shapes only,
// never on how rows or columns are split between threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace popkit::engine {

// Rows [r0, r1): mean[i] and rstd[i] = 1 / sqrt(var + eps) (the biased variance), then
// out[i, c] = (x[i, c] - mean[i]) rstd[i] scale[c] + shift[c]. mean and rstd may be null
// (nothing kept for a backward).
template <typename T>
void layer_norm_forward_rows(const T* x, const T* scale, const T* shift, T* out, T* mean, T* rstd,
                             std::int64_t C, double eps, std::int64_t r0, std::int64_t r1) {
  for (std::int64_t i = r0; i < r1; ++i) {
    const T* xi = x + i * C;
    double sum = 0.0;
    for (std::int64_t c = 0; c < C; ++c) sum += static_cast<double>(xi[c]);
    const double m = sum / static_cast<double>(C);
    double squares = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double d = static_cast<double>(xi[c]) - m;
      squares += d * d;
    }
    const double r = 1.0 / std::sqrt(squares / static_cast<double>(C) + eps);
    // The backward recomputes the normalised value from the kept mean and rstd as T, so
    // the forward uses the same T values.
    const T mt = static_cast<T>(m), rt = static_cast<T>(r);
    T* oi = out + i * C;
    for (std::int64_t c = 0; c < C; ++c) oi[c] = (xi[c] - mt) * rt * scale[c] + shift[c];
    if (mean != nullptr) mean[i] = mt;
    if (rstd != nullptr) rstd[i] = rt;
  }
}

// Rows [r0, r1) of the input's gradient: with norm = (x - mean) rstd and g = dy scale,
// dx = (g - mean_c(g) - norm mean_c(g norm)) rstd.
template <typename T>
void layer_norm_dx_rows(const T* dy, const T* x, const T* scale, const T* mean, const T* rstd,
                        T* dx, std::int64_t C, std::int64_t r0, std::int64_t r1) {
  for (std::int64_t i = r0; i < r1; ++i) {
    const T* xi = x + i * C;
    const T* dyi = dy + i * C;
    double g_sum = 0.0, g_norm_sum = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      const T norm = (xi[c] - mean[i]) * rstd[i];
      const T g = dyi[c] * scale[c];
      g_sum += static_cast<double>(g);
      g_norm_sum += static_cast<double>(g) * static_cast<double>(norm);
    }
    const T g_mean = static_cast<T>(g_sum / static_cast<double>(C));
    const T g_norm_mean = static_cast<T>(g_norm_sum / static_cast<double>(C));
    T* dxi = dx + i * C;
    for (std::int64_t c = 0; c < C; ++c) {
      const T norm = (xi[c] - mean[i]) * rstd[i];
      dxi[c] = (dyi[c] * scale[c] - g_mean - norm * g_norm_mean) * rstd[i];
    }
  }
}

// Columns [c0, c1) of the parameters' gradients over rows [0, n): dscale = sum_i dy norm,
// dshift = sum_i dy, into the accumulators as their running mean at repeat step s
// (layers.h accumulate_running_mean): written whole at s = 0.
template <typename T>
void layer_norm_grad_columns(const T* dy, const T* x, const T* mean, const T* rstd, T* gscale,
                             T* gshift, std::int64_t n, std::int64_t C, std::int64_t s,
                             std::int64_t c0, std::int64_t c1) {
  constexpr std::int64_t kBlock = 64;  // columns summed together, row by row
  for (std::int64_t b0 = c0; b0 < c1; b0 += kBlock) {
    const std::int64_t w = std::min(kBlock, c1 - b0);
    double gs[kBlock] = {}, gb[kBlock] = {};
    for (std::int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * C + b0;
      const T* dyi = dy + i * C + b0;
      for (std::int64_t j = 0; j < w; ++j) {
        const T norm = (xi[j] - mean[i]) * rstd[i];
        gs[j] += static_cast<double>(dyi[j] * norm);
        gb[j] += static_cast<double>(dyi[j]);
      }
    }
    const T a = T(s) / T(s + 1), d = T(s + 1);
    for (std::int64_t j = 0; j < w; ++j) {
      const T g_scale = static_cast<T>(gs[j]), g_shift = static_cast<T>(gb[j]);
      T& acc_scale = gscale[b0 + j];
      T& acc_shift = gshift[b0 + j];
      acc_scale = s == 0 ? g_scale : a * acc_scale + g_scale / d;
      acc_shift = s == 0 ? g_shift : a * acc_shift + g_shift / d;
    }
  }
}

}  // namespace popkit::engine
