// The kernels' scratch as planned memory (issue 14 item 5): what the engine's linear
// kernels (engine/tensor/layers.h) need beyond the op's operands, and the pass that
// gives every op that needs some a workspace tensor, allocated around the op. The
// engine's kernels size themselves with these same functions, so the planned bytes are
// an exact bound of what they touch, never a guess.
//
// The only shape-dependent scratch is the packing of a GEMM: C[m, n] (+)= A[m, k] B[k, n]
// (column-major view, as Eigen's blocked GEMM sees it) packs a kc x mc block of A and a
// kc x nc block of B, with kc = min(k, kGemmKc), mc = min(m, kGemmMc), nc = min(n, kGemmNc)
// (the blocks are fixed by the shapes, never by the machine's caches). Fixed-size locals
// (a 64-float column sum, a 256-float tanh block) are the kernels' stack frame, the
// same for every shape, and not workspace.
#pragma once

#include <algorithm>
#include <cstdint>

#include "planner/plan.h"

namespace popkit::planner {

// A layer's GEMMs run on blocks of kColumnBlock output columns, one replica's blocks on
// several threads when the work is at least kMinBlockedWork multiply-adds; otherwise on
// the whole range at once. Each block packs into its own region of the workspace, so
// the blocks may run on any number of threads.
inline constexpr std::int64_t kColumnBlock = 128;
inline constexpr std::int64_t kMinBlockedWork = std::int64_t{1} << 18;

// Rows up to kSmallRows take the small-batch kernels, which stream W without packing;
// they cover columns in multiples of 2 packets (forward, weight gradient), and the input
// gradient when the layer's width is a multiple of a packet. kPacketWidths: the float
// packet sizes of every kernel level (none, SSE/NEON, AVX2, AVX-512).
inline constexpr std::int64_t kSmallRows = 8;
inline constexpr std::int64_t kPacketWidths[] = {1, 4, 8, 16};

inline constexpr std::int64_t kGemmKc = 256;
inline constexpr std::int64_t kGemmMc = 128;
inline constexpr std::int64_t kGemmNc = 256;
inline constexpr std::uint64_t kWorkspaceAlign = 64;  // each packed block starts on a line

struct GemmBlocking {
  std::int64_t kc = 0, mc = 0, nc = 0;
};
// The blocking of a GEMM with C[m, n], inner size k (column-major view); all zero when
// there is nothing to multiply.
[[nodiscard]] GemmBlocking gemm_blocking(std::int64_t m, std::int64_t k, std::int64_t n);
// The bytes its packed blocks take, each rounded up to kWorkspaceAlign: its scratch.
[[nodiscard]] std::uint64_t gemm_workspace_bytes(std::int64_t m, std::int64_t k, std::int64_t n,
                                                 std::uint64_t scalar_bytes = 4);

// How a GEMM over n_cols output columns with rows x inner multiply-adds per column is cut:
// `n` calls of `width` columns (the last one may be narrower), or, where the GEMM's rows
// may be cut instead (gemm_tiles), `row_tiles` calls of kRowTile rows (the last takes the
// rest) on every column. Block b covers column block b % n of row tile b / n.
// The blocks pack into at most kMaxRegions regions: block b into region b % kMaxRegions,
// the blocks of a region one after the other (one task of the pool), so that an op's
// workspace is bounded whatever its width (a vocabulary of 50,257 is 393 blocks).
inline constexpr std::int64_t kMaxRegions = 32;

struct ColumnBlocks {
  std::int64_t n = 1;
  std::int64_t width = 0;
  std::int64_t row_tiles = 1;
  [[nodiscard]] std::int64_t blocks() const { return n * row_tiles; }
  // The regions, and the tasks the blocks run as.
  [[nodiscard]] std::int64_t regions() const { return std::min(blocks(), kMaxRegions); }
  // The share of the GEMM's time its busiest thread takes when `threads` threads run the
  // tasks: ceil(tasks / threads) tasks of at most ceil(blocks / tasks) blocks, over them.
  [[nodiscard]] double busiest_share(std::int64_t threads) const {
    const std::int64_t tasks = regions(), all = blocks();
    const std::int64_t busiest = (tasks + threads - 1) / threads * ((all + tasks - 1) / tasks);
    return static_cast<double>(std::min(busiest, all)) / static_cast<double>(all);
  }
};
[[nodiscard]] ColumnBlocks column_blocks(std::int64_t rows_x_inner, std::int64_t n_cols);

// A linear layer's forward and input gradient, whose rows are the micro-batch's: cut in
// row tiles of kRowTile (each on every column) when that gives more calls than the column
// blocks do and the work is large enough to block (kMinBlockedWork); else in the column
// blocks. More calls let one replica use more threads (a 512-wide layer is 4 column
// blocks, its 2,048 rows 16 tiles), for a region of workspace each. Every element's sum
// runs over the inner dimension in the same order however the rows and columns are cut,
// and a call on every column walks the kGemmMc = kColumnBlock column panels the blocks
// are, so the cuts give the same bits (tests/engine/gemm_tiles_test.cpp).
inline constexpr std::int64_t kRowTile = 128;
static_assert(kGemmMc == kColumnBlock && kRowTile > kSmallRows);
[[nodiscard]] ColumnBlocks gemm_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols);

// Block b of a GEMM cut by `cb` over [0, rows) x [0, n_cols): its rows, its columns and
// the region of the workspace it packs into.
struct GemmTile {
  std::int64_t r0 = 0, r1 = 0, j0 = 0, j1 = 0, region = 0;
};
[[nodiscard]] GemmTile gemm_tile(const ColumnBlocks& cb, std::int64_t b, std::int64_t rows,
                                 std::int64_t n_cols);

// One op's workspace: `regions` regions of `region_bytes`, one per column block up to
// kMaxRegions; the call on block b packs into region b % kMaxRegions.
struct OpWorkspace {
  std::uint64_t region_bytes = 0;
  std::int64_t regions = 0;
  [[nodiscard]] std::uint64_t bytes() const {
    return region_bytes * static_cast<std::uint64_t>(regions);
  }
};

// The scratch of one call of the linear kernels over columns [j0, j1), n rows:
//  forward: pre[:, j0:j1] = x[n, in] W[:, j0:j1]     (columns j of pre and W)
//  grad:    gw[:, j0:j1] (+)= x^T dz[:, j0:j1]       (columns j of gw and dz)
//  dx:      dx[:, j0:j1] = dz[n, out] W[j0:j1, :]^T  (columns j of dx, rows of W)
// The small-batch kernels' share is excluded for every packet width, so the bytes are
// the largest any kernel level needs.
[[nodiscard]] std::uint64_t linear_forward_call_workspace(std::int64_t n, std::int64_t in,
                                                          std::int64_t j0, std::int64_t j1);
[[nodiscard]] std::uint64_t linear_grad_call_workspace(std::int64_t n, std::int64_t in,
                                                       std::int64_t j0, std::int64_t j1);
[[nodiscard]] std::uint64_t linear_dx_call_workspace(std::int64_t n, std::int64_t out,
                                                     std::int64_t j0, std::int64_t j1);

// A linear layer's forward and backward ops on n rows: the forward's GEMM; the
// backward's weight gradient and input gradient, each cut its own way (they run one
// after the other, each laying its regions out from the workspace's start); and the
// backward op's workspace, the larger of its two (dx only when computed).
[[nodiscard]] OpWorkspace linear_forward_workspace(std::int64_t n, std::int64_t in,
                                                   std::int64_t out);
[[nodiscard]] OpWorkspace linear_grad_workspace(std::int64_t n, std::int64_t in, std::int64_t out);
[[nodiscard]] OpWorkspace linear_dx_workspace(std::int64_t n, std::int64_t in, std::int64_t out);
[[nodiscard]] OpWorkspace linear_backward_workspace(std::int64_t n, std::int64_t in,
                                                    std::int64_t out, bool dx);

// A language-model head's ops on n rows, x [n, C] and W [V, C] (the token table's
// layout): logits = x W^T in column blocks of V; the weight's gradient dy^T x in blocks
// of W's rows (V), dx = dy W in column blocks of C; dx then the gradient, sharing regions.
[[nodiscard]] OpWorkspace lm_head_forward_workspace(std::int64_t n, std::int64_t C, std::int64_t V);
[[nodiscard]] OpWorkspace lm_head_backward_workspace(std::int64_t n, std::int64_t C, std::int64_t V,
                                                     bool dx);

// The workspace bytes an op needs (0 for most kinds).
[[nodiscard]] std::uint64_t op_workspace_bytes(const Op& op, const Plan& plan);

// Gives every top-level op of every phase that needs workspace (a repeat: the largest
// need of its body) a kWorkspace tensor of that size, allocated just before it and freed
// just after; the op (or the repeat's body ops that need it) name it in Op::workspace.
void add_workspace(Plan& plan);

}  // namespace popkit::planner
