// The linear and layer-norm kernels run over an op's blocks (OpRun::in_column_blocks and
// in_element_blocks),
// each GEMM's column blocks packing into their own regions of a workspace: the calls
// that the linear and layer_norm entries (layer_kinds.cpp) and the decoder block's
// (decoder_block.cpp), which runs four linears and two layer norms, share.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "engine/layer_kinds.h"
#include "planner/workspace.h"

namespace popkit::engine {

// A workspace cut into an op's column blocks' regions (planner/workspace.h): the call on
// the block starting at column j packs into region j / kColumnBlock % kMaxRegions. The plan sized
// the workspace with the same functions; a smaller one is a bug in the plan.
struct Regions {
  Regions(float* at, std::uint64_t available, const planner::OpWorkspace& need);
  // The op's whole workspace.
  Regions(const OpRun& run, const planner::OpWorkspace& need)
      : Regions(run.workspace(), run.workspace_bytes(), need) {}
  [[nodiscard]] float* of(std::int64_t j0) const {
    return at(j0 / planner::kColumnBlock % planner::kMaxRegions);
  }
  // Region `region` (a GEMM tile's, planner::GemmTile).
  [[nodiscard]] float* at(std::int64_t region) const {
    if (base == nullptr) return nullptr;
    return base + static_cast<std::uint64_t>(region) * bytes / sizeof(float);
  }
  float* base;
  std::uint64_t bytes;
};

// Where a call's GEMMs pack: `bytes` from `at` (null and 0 for none).
struct Packing {
  float* at = nullptr;
  std::uint64_t bytes = 0;
};

// pre = x W + b, out = act(pre) on n rows (out may be pre).
struct LinearArgs {
  const float* w;
  std::int64_t n, in, out;
};
void linear_forward_call(const OpRun& run, const Packing& ws, const LinearArgs& a,
                         config::Activation act, const float* x, const float* b, float* pre,
                         float* out);
// From dz (the gradient of pre; divided by s + 1 in place once dx is done): dx = dz W^T
// when dx is not null, then the running mean of the weight's and bias's gradients at
// repeat step s.
void linear_backward_call(const OpRun& run, const Packing& ws, const LinearArgs& a, float* dz,
                          const float* x, float* dx, float* gw, float* gb, std::int64_t s);

// dy *= act'(pre) over n elements, and x /= by (the running mean's division), in element
// blocks (OpRun::in_element_blocks).
void activation_backward_call(const OpRun& run, config::Activation act, const float* pre, float* dy,
                              std::int64_t n);
void divide_in_blocks(const OpRun& run, float* x, std::int64_t by, std::int64_t n);

// A layer norm over n rows of C: out = (x - mean) rstd scale + shift (mean and rstd may
// be null); its backward's dx (when not null) and the running mean of its parameters'
// gradients at repeat step s.
struct LayerNormArgs {
  const float* x;
  const float* scale;
  float* mean;
  float* rstd;
  std::int64_t n, C;
};
void layer_norm_forward_call(const OpRun& run, const LayerNormArgs& a, const float* shift,
                             float* out, double eps);
void layer_norm_backward_call(const OpRun& run, const LayerNormArgs& a, const float* dy, float* dx,
                              float* gscale, float* gshift, std::int64_t s);

}  // namespace popkit::engine
