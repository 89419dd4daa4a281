// The kernels' workspace (workspace.h): GEMM blocking, the linear kernels' scratch per
// call and per op, and the pass that plans it as device tensors around the ops.
#include "planner/workspace.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "planner/layer_kinds.h"
#include "planner/operands.h"

namespace popkit::planner {
namespace {

std::uint64_t round_up(std::uint64_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// The columns of [j0, j1) that Eigen's GEMM computes when n rows take the small-batch
// kernels (which cover a multiple of 2 packets), the most over every packet width.
std::int64_t gemm_columns_beside_small(std::int64_t n, std::int64_t j0, std::int64_t j1) {
  if (n > kSmallRows) return j1 - j0;
  std::int64_t most = 0;
  for (const std::int64_t p : kPacketWidths) most = std::max(most, (j1 - j0) % (2 * p));
  return most;
}

// The largest call workspace over the column blocks of an op (the first and the last
// are the only widths).
template <typename Fn>
OpWorkspace over_blocks(const ColumnBlocks& cb, std::int64_t n_cols, const Fn& call) {
  if (n_cols <= 0) return {};
  const std::uint64_t first = call(0, std::min(n_cols, cb.width));
  const std::uint64_t last = call((cb.n - 1) * cb.width, n_cols);
  const std::uint64_t region = std::max(first, last);
  return region == 0 ? OpWorkspace{} : OpWorkspace{region, cb.regions()};
}

}  // namespace

GemmBlocking gemm_blocking(std::int64_t m, std::int64_t k, std::int64_t n) {
  if (m <= 0 || k <= 0 || n <= 0) return {};
  return {std::min(k, kGemmKc), std::min(m, kGemmMc), std::min(n, kGemmNc)};
}

std::uint64_t gemm_workspace_bytes(std::int64_t m, std::int64_t k, std::int64_t n,
                                   std::uint64_t scalar_bytes) {
  const GemmBlocking b = gemm_blocking(m, k, n);
  const auto elems = [](std::int64_t x, std::int64_t y) {
    return static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y);
  };
  if (b.kc == 0) return 0;
  return round_up(elems(b.kc, b.mc) * scalar_bytes) + round_up(elems(b.kc, b.nc) * scalar_bytes);
}

ColumnBlocks column_blocks(std::int64_t rows_x_inner, std::int64_t n_cols) {
  const std::int64_t n_blocks = (n_cols + kColumnBlock - 1) / kColumnBlock;
  if (n_blocks < 2 || rows_x_inner * n_cols < kMinBlockedWork) return {1, n_cols};
  return {n_blocks, kColumnBlock};
}

ColumnBlocks gemm_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols) {
  const ColumnBlocks cb = column_blocks(rows * inner, n_cols);
  const std::int64_t tiles = rows / kRowTile;
  if (tiles <= cb.n || rows * inner * n_cols < kMinBlockedWork) return cb;
  return {1, n_cols, tiles};
}

GemmTile gemm_tile(const ColumnBlocks& cb, std::int64_t b, std::int64_t rows, std::int64_t n_cols) {
  const std::int64_t tile = b / cb.n, block = b % cb.n;
  GemmTile t;
  t.r0 = cb.row_tiles == 1 ? 0 : tile * kRowTile;
  t.r1 = tile + 1 == cb.row_tiles ? rows : t.r0 + kRowTile;
  t.j0 = block * cb.width;
  t.j1 = cb.n == 1 ? n_cols : std::min(n_cols, (block + 1) * cb.width);
  t.region = b % kMaxRegions;
  return t;
}

// Column-major views: forward pre^T[cols, n] = W^T x^T (inner in); grad gw^T[cols, in] =
// dz^T x (inner n); dx dx^T[cols, n] = W dz^T (inner out).
std::uint64_t linear_forward_call_workspace(std::int64_t n, std::int64_t in, std::int64_t j0,
                                            std::int64_t j1) {
  return gemm_workspace_bytes(gemm_columns_beside_small(n, j0, j1), in, n);
}

std::uint64_t linear_grad_call_workspace(std::int64_t n, std::int64_t in, std::int64_t j0,
                                         std::int64_t j1) {
  return gemm_workspace_bytes(gemm_columns_beside_small(n, j0, j1), n, in);
}

std::uint64_t linear_dx_call_workspace(std::int64_t n, std::int64_t out, std::int64_t j0,
                                       std::int64_t j1) {
  bool gemm = n > kSmallRows;  // else the small-batch kernel, when out is whole packets
  for (const std::int64_t p : kPacketWidths) gemm = gemm || out % p != 0;
  return gemm ? gemm_workspace_bytes(j1 - j0, out, n) : 0;
}

// The largest call workspace over a linear's row tiles (planner::gemm_tiles): the first
// tile's rows and the last's are the only heights; otherwise its column blocks.
template <typename Fn>
OpWorkspace over_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols, const Fn& call) {
  const ColumnBlocks cb = gemm_tiles(rows, inner, n_cols);
  if (cb.row_tiles == 1)
    return over_blocks(cb, n_cols,
                       [&](std::int64_t j0, std::int64_t j1) { return call(rows, j0, j1); });
  const GemmTile last = gemm_tile(cb, cb.blocks() - 1, rows, n_cols);
  const std::uint64_t region = std::max(call(kRowTile, std::int64_t{0}, n_cols),
                                        call(last.r1 - last.r0, std::int64_t{0}, n_cols));
  return region == 0 ? OpWorkspace{} : OpWorkspace{region, cb.regions()};
}

OpWorkspace linear_forward_workspace(std::int64_t n, std::int64_t in, std::int64_t out) {
  return over_tiles(n, in, out, [&](std::int64_t rows, std::int64_t j0, std::int64_t j1) {
    return linear_forward_call_workspace(rows, in, j0, j1);
  });
}

OpWorkspace linear_grad_workspace(std::int64_t n, std::int64_t in, std::int64_t out) {
  return over_blocks(column_blocks(n * in, out), out, [&](std::int64_t j0, std::int64_t j1) {
    return linear_grad_call_workspace(n, in, j0, j1);
  });
}

OpWorkspace linear_dx_workspace(std::int64_t n, std::int64_t in, std::int64_t out) {
  return over_tiles(n, out, in, [&](std::int64_t rows, std::int64_t i0, std::int64_t i1) {
    return linear_dx_call_workspace(rows, out, i0, i1);
  });
}

OpWorkspace linear_backward_workspace(std::int64_t n, std::int64_t in, std::int64_t out, bool dx) {
  const OpWorkspace grad = linear_grad_workspace(n, in, out);
  if (!dx) return grad;
  const OpWorkspace d = linear_dx_workspace(n, in, out);
  return d.bytes() > grad.bytes() ? d : grad;
}

// Row-major C [rows, cols] = A B runs as gemm_workspace_bytes(cols, depth, rows)
// (engine/tensor/layers.h's gemm).
OpWorkspace lm_head_forward_workspace(std::int64_t n, std::int64_t C, std::int64_t V) {
  return over_blocks(column_blocks(n * C, V), V, [&](std::int64_t j0, std::int64_t j1) {
    return gemm_workspace_bytes(j1 - j0, C, n);
  });
}

OpWorkspace lm_head_backward_workspace(std::int64_t n, std::int64_t C, std::int64_t V, bool dx) {
  const OpWorkspace grad = over_blocks(
      column_blocks(n * C, V), V,
      [&](std::int64_t j0, std::int64_t j1) { return gemm_workspace_bytes(C, n, j1 - j0); });
  if (!dx) return grad;
  const OpWorkspace d = over_blocks(
      column_blocks(n * V, C), C,
      [&](std::int64_t i0, std::int64_t i1) { return gemm_workspace_bytes(i1 - i0, V, n); });
  return {std::max(grad.region_bytes, d.region_bytes), std::max(grad.regions, d.regions)};
}

std::uint64_t op_workspace_bytes(const Op& op, const Plan& plan) {
  if (op.kind == OpKind::kRepeat) {
    std::uint64_t most = 0;
    for (const Op& o : op.body) most = std::max(most, op_workspace_bytes(o, plan));
    return most;
  }
  if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) return 0;
  const LayerInfo& l = plan.layers.at(static_cast<std::size_t>(op.layer));
  const LayerKind& kind = layer_kind(l.kind);
  // inputs[0] is [rows, width] for every layer kind: in (forward, linear backward) or dy.
  const std::int64_t rows = plan.tensors.at(static_cast<std::size_t>(op.inputs.at(0))).shape.at(0);
  if (op.kind == OpKind::kForward)
    return kind.forward_workspace(l, rows, plan.program == Program::kTrain).bytes();
  const bool dx = !op.outputs.empty() && op.outputs[0] >= 0;
  return kind.backward_workspace(l, rows, dx).bytes();
}

void add_workspace(Plan& plan) {
  for (Phase& phase : plan.phases) {
    std::vector<Op> ops;
    ops.reserve(phase.ops.size());
    int n_in_phase = 0;
    for (Op& o : phase.ops) {
      const std::uint64_t bytes = op_workspace_bytes(o, plan);
      if (bytes == 0) {
        ops.push_back(std::move(o));
        continue;
      }
      POPKIT_ASSERT(bytes % 4 == 0);
      DeviceTensor t;
      t.name = fmt::format("{}.workspace", phase.name);
      if (++n_in_phase > 1) t.name += fmt::format("#{}", n_in_phase);
      t.cls = TensorClass::kWorkspace;
      t.dtype = DType::kFloat32;
      t.nelms = static_cast<std::int64_t>(bytes / 4);
      t.shape = {t.nelms};
      t.nbytes = bytes;
      const int index = static_cast<int>(plan.tensors.size());
      plan.tensors.push_back(t);
      Op alloc;
      alloc.kind = OpKind::kAlloc;
      alloc.label = t.name;
      alloc.outputs = {index};
      Op free = alloc;
      free.kind = OpKind::kFree;
      free.outputs.clear();
      free.inputs = {index};
      if (o.kind == OpKind::kRepeat) {
        for (Op& b : o.body)
          if (op_workspace_bytes(b, plan) > 0) b.workspace = index;
      } else {
        o.workspace = index;
      }
      ops.push_back(std::move(alloc));
      ops.push_back(std::move(o));
      ops.push_back(std::move(free));
    }
    phase.ops = std::move(ops);
  }
}

}  // namespace popkit::planner
