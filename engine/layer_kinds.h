// The engine's layer kinds, each defined in one place (layer_kinds.cpp): how its forward
// and backward ops run on its kernels (planner/layer_kinds.h has the same kinds' operands,
// their shapes, which the engine's plan checks read, and costs). The interpreter
// (engine/exec/) finds a kind here by the layer's type and knows nothing of what it does.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "engine/kernels/kernels.h"
#include "planner/plan.h"
#include "planner/workspace.h"

namespace popkit::engine {

// One replica running one op at one repeat step.
class OpRun {
 public:
  virtual ~OpRun() = default;
  [[nodiscard]] virtual float* f32(int tensor) const = 0;
  [[nodiscard]] virtual std::int64_t rows(int tensor) const = 0;
  // fn(j0, j1) over column blocks of [0, n_cols), on the pool when one replica has the
  // threads and the work (rows x inner x cols) is large enough; the blocks depend on
  // the shapes only.
  virtual void in_column_blocks(
      std::int64_t rows_x_inner, std::int64_t n_cols,
      const std::function<void(std::int64_t, std::int64_t)>& fn) const = 0;
  // fn(tile) over a linear GEMM's tiles of [0, rows) x [0, n_cols) (planner::gemm_tiles),
  // each packing into its region of the op's workspace; on the pool likewise.
  virtual void in_gemm_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols,
                             const std::function<void(const planner::GemmTile&)>& fn) const = 0;
  // fn(i0, i1) over blocks of [0, n) of an element-wise pass (planner/element_blocks.h),
  // on the pool when one replica has the threads.
  virtual void in_element_blocks(
      std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) const = 0;
  // The kernel level in use: its shared table, and the key to each kind's
  // (engine::kernels_at).
  [[nodiscard]] virtual const Kernels& kernels() const = 0;
  // The op's workspace (planner/workspace.h), 64-byte aligned, and its bytes; null and 0
  // when the plan gives the op none.
  [[nodiscard]] virtual float* workspace() const = 0;
  [[nodiscard]] virtual std::uint64_t workspace_bytes() const = 0;
  // The random key of the op's rows (PopXL's seed input): training.seed, the optimizer
  // step being run (from 1), and the index in the global batch of the op's first row.
  std::uint64_t seed = 0;
  std::int64_t optimizer_step = 0;
  std::int64_t first_sample = 0;
  std::int64_t repeat_step = 0;  // s of the enclosing repeat (0 outside one)
};

// forward and backward are null for a kind planned but not yet run (the plan check
// refuses it).
struct LayerKernel {
  std::string_view type;  // the kind's name (config/layer_kinds.h)
  void (*forward)(const planner::Op& op, const planner::LayerInfo& layer, const OpRun& run);
  void (*backward)(const planner::Op& op, const planner::LayerInfo& layer, const OpRun& run);
};

const LayerKernel& layer_kernel(std::string_view type);

}  // namespace popkit::engine
