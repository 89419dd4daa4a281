// One level's kernel table: this file is compiled once per x86-64 level, each time with
// that level's -march and its own table symbol (POPKIT_KERNEL_SYMBOL); the build then
// renames every other symbol of the object (cmake/isolate_symbols.cmake), so the
// inline functions and templates it instantiates (Eigen's GEMM among them) cannot be
// merged with another level's copy by the linker.
#include <Eigen/Core>

#include "engine/kernels/kernels.h"
#include "engine/tensor/adam_step.h"
#include "engine/tensor/layer_norm.h"
#include "engine/tensor/layers.h"
#include "engine/tensor/sgd.h"

#ifndef POPKIT_KERNEL_SYMBOL
#error "POPKIT_KERNEL_SYMBOL names this level's table (set by engine/CMakeLists.txt)"
#endif
#ifndef POPKIT_KERNEL_LEVEL
#error "POPKIT_KERNEL_LEVEL names this level (set by engine/CMakeLists.txt)"
#endif

namespace popkit::engine {
namespace {

void forward(config::Activation act, const float* x, const float* w, const float* b, float* pre,
             float* out, std::int64_t n, std::int64_t in, std::int64_t n_out, std::int64_t j0,
             std::int64_t j1, float* ws, std::uint64_t ws_bytes) {
  linear_act_forward_columns<float>(act, x, w, b, pre, out, n, in, n_out, j0, j1, ws, ws_bytes);
}
void grad(const float* dz, const float* x, float* gw, float* gb, std::int64_t n, std::int64_t in,
          std::int64_t n_out, std::int64_t s, std::int64_t j0, std::int64_t j1, float* ws,
          std::uint64_t ws_bytes) {
  linear_grad_columns<float>(dz, x, gw, gb, n, in, n_out, s, j0, j1, ws, ws_bytes);
}
void dx(const float* dz, const float* w, float* dxp, std::int64_t n, std::int64_t in,
        std::int64_t n_out, std::int64_t i0, std::int64_t i1, float* ws, std::uint64_t ws_bytes) {
  linear_dx_columns<float>(dz, w, dxp, n, in, n_out, i0, i1, ws, ws_bytes);
}
void act_backward(config::Activation act, const float* pre, float* dy, std::int64_t n) {
  activation_backward<float>(act, pre, dy, n);
}
void ln_forward(const float* x, const float* scale, const float* shift, float* out, float* mean,
                float* rstd, std::int64_t C, double eps, std::int64_t r0, std::int64_t r1) {
  layer_norm_forward_rows<float>(x, scale, shift, out, mean, rstd, C, eps, r0, r1);
}
void ln_dx(const float* dy, const float* x, const float* scale, const float* mean,
           const float* rstd, float* dxp, std::int64_t C, std::int64_t r0, std::int64_t r1) {
  layer_norm_dx_rows<float>(dy, x, scale, mean, rstd, dxp, C, r0, r1);
}
void ln_grad(const float* dy, const float* x, const float* mean, const float* rstd, float* gs,
             float* gb, std::int64_t n, std::int64_t C, std::int64_t s, std::int64_t c0,
             std::int64_t c1) {
  layer_norm_grad_columns<float>(dy, x, mean, rstd, gs, gb, n, C, s, c0, c1);
}
float loss(const float* logits, const float* labels, float* dlogits, std::int64_t n,
           std::int64_t classes) {
  return softmax_cross_entropy<float>(logits, labels, dlogits, n, classes);
}
void adam(float* w, const float* g, float* m, float* v, std::int64_t n, std::int64_t t,
          const AdamParams& p) {
  adam_step(w, g, m, v, n, t, p);
}
void adam_half(float* w, const float* g, void* m, float* v, std::int64_t n, std::int64_t t,
               const AdamParams& p) {
  adam_step(w, g, static_cast<Eigen::half*>(m), v, n, t, p);
}
void sgd(float* w, const float* g, float* b, std::int64_t n, const SgdParams& p) {
  sgd_step(w, g, b, n, p);
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

extern "C" {
extern const popkit::engine::Kernels POPKIT_KERNEL_SYMBOL;
const popkit::engine::Kernels POPKIT_KERNEL_SYMBOL = {
    .level = POPKIT_KERNEL_LEVEL,
    .instructions = POPKIT_KERNEL_INSTRUCTIONS,
    .linear_act_forward_columns = &popkit::engine::forward,
    .linear_grad_columns = &popkit::engine::grad,
    .linear_dx_columns = &popkit::engine::dx,
    .activation_backward = &popkit::engine::act_backward,
    .layer_norm_forward_rows = &popkit::engine::ln_forward,
    .layer_norm_dx_rows = &popkit::engine::ln_dx,
    .layer_norm_grad_columns = &popkit::engine::ln_grad,
    .softmax_cross_entropy = &popkit::engine::loss,
    .adam_step = &popkit::engine::adam,
    .adam_step_half_m = &popkit::engine::adam_half,
    .sgd_step = &popkit::engine::sgd,
    .divide = &popkit::engine::divide,
    .reduce = &popkit::engine::reduce,
};
}
