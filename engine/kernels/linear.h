// The linear kind's kernels (engine/tensor/layers.h), one table per x86-64 level
// (linear_level.cpp): y = act(x W + b) over column blocks, its gradients, and the
// activation's backward. The engine's linear entry (engine/layer_kinds.cpp) calls them.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "engine/kernels/kernels.h"

namespace popkit::engine {

struct LinearKernels {
  // The kernels pack their GEMM operands into `workspace` (64-byte aligned), which must
  // hold planner/workspace.h's linear_*_call_workspace bytes for the call; it may be null
  // when that is 0.
  void (*forward_columns)(config::Activation act, const float* x, const float* w, const float* b,
                          float* pre, float* out, std::int64_t n, std::int64_t in,
                          std::int64_t n_out, std::int64_t j0, std::int64_t j1, float* workspace,
                          std::uint64_t workspace_bytes);
  void (*grad_columns)(const float* dz, const float* x, float* gw, float* gb, std::int64_t n,
                       std::int64_t in, std::int64_t n_out, std::int64_t s, std::int64_t j0,
                       std::int64_t j1, float* workspace, std::uint64_t workspace_bytes);
  void (*dx_columns)(const float* dz, const float* w, float* dx, std::int64_t n, std::int64_t in,
                     std::int64_t n_out, std::int64_t i0, std::int64_t i1, float* workspace,
                     std::uint64_t workspace_bytes);
  // dy *= act'(pre), in place.
  void (*activation_backward)(config::Activation act, const float* pre, float* dy, std::int64_t n);
};

POPKIT_KERNEL_LEVELS(LinearKernels, linear);

}  // namespace popkit::engine
