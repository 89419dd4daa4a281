// The engine's hot loops behind one table of function pointers, compiled once per
// x86-64 level (baseline SSE2, v2, v3 with AVX2 and FMA, v4 with AVX-512) and chosen at
// start-up from cpuid, so the portable build runs as fast as a `-march=native` one.
// A `native` build compiles one level, for its own CPU. POPKIT_CPU_LEVEL forces a level
// (for tests and comparisons); a level this CPU cannot run is an error, never a SIGILL.
//
// Results within one level depend on the values and shapes only (see layers.h); across
// levels they may differ in float rounding (FMA contracts a*b+c, packet widths change
// the order of Eigen's inner sums).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "config/config.h"

namespace popkit::engine {

struct AdamParams;
struct SgdParams;

struct Kernels {
  const char* level;         // "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4" or "native"
  const char* instructions;  // what the level adds, for --version: "AVX-512", ...
  // layers.h, on float. The linear kernels pack their GEMM operands into `workspace`
  // (64-byte aligned), which must hold planner/workspace.h's linear_*_call_workspace
  // bytes for the call; it may be null when that is 0.
  void (*linear_act_forward_columns)(config::Activation act, const float* x, const float* w,
                                     const float* b, float* pre, float* out, std::int64_t n,
                                     std::int64_t in, std::int64_t n_out, std::int64_t j0,
                                     std::int64_t j1, float* workspace,
                                     std::uint64_t workspace_bytes);
  void (*linear_grad_columns)(const float* dz, const float* x, float* gw, float* gb, std::int64_t n,
                              std::int64_t in, std::int64_t n_out, std::int64_t s, std::int64_t j0,
                              std::int64_t j1, float* workspace, std::uint64_t workspace_bytes);
  void (*linear_dx_columns)(const float* dz, const float* w, float* dx, std::int64_t n,
                            std::int64_t in, std::int64_t n_out, std::int64_t i0, std::int64_t i1,
                            float* workspace, std::uint64_t workspace_bytes);
  void (*activation_backward)(config::Activation act, const float* pre, float* dy, std::int64_t n);
  // layer_norm.h: rows [r0, r1) of the forward (mean and rstd may be null) and of dx;
  // columns [c0, c1) of the scale's and shift's gradients at repeat step s.
  void (*layer_norm_forward_rows)(const float* x, const float* scale, const float* shift,
                                  float* out, float* mean, float* rstd, std::int64_t C, double eps,
                                  std::int64_t r0, std::int64_t r1);
  void (*layer_norm_dx_rows)(const float* dy, const float* x, const float* scale, const float* mean,
                             const float* rstd, float* dx, std::int64_t C, std::int64_t r0,
                             std::int64_t r1);
  void (*layer_norm_grad_columns)(const float* dy, const float* x, const float* mean,
                                  const float* rstd, float* gscale, float* gshift, std::int64_t n,
                                  std::int64_t C, std::int64_t s, std::int64_t c0, std::int64_t c1);
  float (*softmax_cross_entropy)(const float* logits, const float* labels, float* dlogits,
                                 std::int64_t n, std::int64_t classes);
  // adam_step.h
  void (*adam_step)(float* w, const float* g, float* m, float* v, std::int64_t n, std::int64_t t,
                    const AdamParams& p);
  void (*adam_step_half_m)(float* w, const float* g, void* m_half, float* v, std::int64_t n,
                           std::int64_t t, const AdamParams& p);
  // sgd.h; b (the momentum buffer) is null without momentum.
  void (*sgd_step)(float* w, const float* g, float* b, std::int64_t n, const SgdParams& p);
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
bool runs_here(const Kernels& k);
// The level in use: POPKIT_CPU_LEVEL's when set (an unknown level, or one this CPU does
// not run, throws popkit::Error), else the highest this CPU runs. Chosen once.
const Kernels& kernels();
// For --version and the run file: "x86-64-v4 (AVX-512), chosen from cpuid" or
// "... , forced by POPKIT_CPU_LEVEL".
std::string kernels_in_use();

}  // namespace popkit::engine
