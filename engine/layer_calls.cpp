// The linear and layer-norm kernels over an op's blocks (layer_calls.h).
#include "engine/layer_calls.h"

#include "base/error.h"
#include "engine/kernels/layer_norm.h"
#include "engine/kernels/linear.h"

namespace popkit::engine {

Regions::Regions(float* at, std::uint64_t available, const planner::OpWorkspace& need)
    : base(at), bytes(need.region_bytes) {
  if (need.bytes() > available)
    throw Error("the op's workspace holds {} bytes but its kernels need {}", available,
                need.bytes());
}

void linear_forward_call(const OpRun& run, const Packing& ws, const LinearArgs& a,
                         config::Activation act, const float* x, const float* b, float* pre,
                         float* out) {
  const LinearKernels& k = kernels_at<LinearKernels>(run.kernels());
  const Regions r(ws.at, ws.bytes, planner::linear_forward_workspace(a.n, a.in, a.out));
  run.in_gemm_tiles(a.n, a.in, a.out, [&](const planner::GemmTile& t) {
    k.forward_columns(act, x + t.r0 * a.in, a.w, b, pre + t.r0 * a.out, out + t.r0 * a.out,
                      t.r1 - t.r0, a.in, a.out, t.j0, t.j1, r.at(t.region), r.bytes);
  });
}

void linear_backward_call(const OpRun& run, const Packing& ws, const LinearArgs& a, float* dz,
                          const float* x, float* dx, float* gw, float* gb, std::int64_t s) {
  const LinearKernels& k = kernels_at<LinearKernels>(run.kernels());
  if (dx != nullptr) {
    const Regions r(ws.at, ws.bytes, planner::linear_dx_workspace(a.n, a.in, a.out));
    run.in_gemm_tiles(a.n, a.out, a.in, [&](const planner::GemmTile& t) {
      k.dx_columns(dz + t.r0 * a.out, a.w, dx + t.r0 * a.in, t.r1 - t.r0, a.in, a.out, t.j0, t.j1,
                   r.at(t.region), r.bytes);
    });
  }
  // The running mean's g/(s+1) as x^T (dz/(s+1)): dz is no longer needed.
  if (s > 0) divide_in_blocks(run, dz, s + 1, a.n * a.out);
  const Regions r(ws.at, ws.bytes, planner::linear_grad_workspace(a.n, a.in, a.out));
  run.in_column_blocks(a.n * a.in, a.out, [&](std::int64_t j0, std::int64_t j1) {
    k.grad_columns(dz, x, gw, gb, a.n, a.in, a.out, s, j0, j1, r.of(j0), r.bytes);
  });
}

void activation_backward_call(const OpRun& run, config::Activation act, const float* pre, float* dy,
                              std::int64_t n) {
  const LinearKernels& k = kernels_at<LinearKernels>(run.kernels());
  run.in_element_blocks(n, [&](std::int64_t i0, std::int64_t i1) {
    k.activation_backward(act, pre + i0, dy + i0, i1 - i0);
  });
}

void divide_in_blocks(const OpRun& run, float* x, std::int64_t by, std::int64_t n) {
  run.in_element_blocks(n, [&](std::int64_t i0, std::int64_t i1) {
    run.kernels().divide(x + i0, static_cast<float>(by), i1 - i0);
  });
}

// Rows on the pool in blocks the shapes fix.
void layer_norm_forward_call(const OpRun& run, const LayerNormArgs& a, const float* shift,
                             float* out, double eps) {
  const LayerNormKernels& k = kernels_at<LayerNormKernels>(run.kernels());
  run.in_column_blocks(a.C, a.n, [&](std::int64_t r0, std::int64_t r1) {
    k.forward_rows(a.x, a.scale, shift, out, a.mean, a.rstd, a.C, eps, r0, r1);
  });
}

void layer_norm_backward_call(const OpRun& run, const LayerNormArgs& a, const float* dy, float* dx,
                              float* gscale, float* gshift, std::int64_t s) {
  const LayerNormKernels& k = kernels_at<LayerNormKernels>(run.kernels());
  if (dx != nullptr)
    run.in_column_blocks(a.C, a.n, [&](std::int64_t r0, std::int64_t r1) {
      k.dx_rows(dy, a.x, a.scale, a.mean, a.rstd, dx, a.C, r0, r1);
    });
  run.in_column_blocks(a.n, a.C, [&](std::int64_t c0, std::int64_t c1) {
    k.grad_columns(dy, a.x, a.mean, a.rstd, gscale, gshift, a.n, a.C, s, c0, c1);
  });
}

}  // namespace popkit::engine
