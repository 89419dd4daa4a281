// A linear's forward and input gradient in row tiles (planner::gemm_tiles), as the
// engine runs them, give the bits of the column blocks called on all the rows at once,
// at every level this CPU runs. Each tile packs within its planned region.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/kernels/linear.h"
#include "planner/workspace.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using namespace popkit::test;
namespace planner = popkit::planner;

namespace {

struct Shape {
  std::int64_t rows, in, out;
};

// 512 rows: 4 tiles of 128; 777: 5 of 128 and one of 137; 1030: 7 and one of 134 (the
// last tile takes the rest). The widths: less than one column block, and three blocks of
// which the last is narrow; and 1,030 columns (9 blocks), which the rows do not outnumber
// until 1,280 rows: column blocks there.
std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (const std::int64_t rows : {512, 777, 1030})
    for (const auto& [in, out] :
         {std::pair<std::int64_t, std::int64_t>{33, 40}, {300, 260}, {20, 1030}})
      all.push_back({rows, in, out});
  return all;
}

// fn(j0, j1, workspace, bytes) over the column blocks of n_cols as one call on every row
// (the engine's blocks before row tiles).
template <typename Fn>
void whole_rows(std::int64_t rows, std::int64_t inner, std::int64_t n_cols, Fn&& fn) {
  const planner::ColumnBlocks cb = planner::column_blocks(rows * inner, n_cols);
  for (std::int64_t k = 0; k < cb.n; ++k)
    fn(k * cb.width, cb.n == 1 ? n_cols : std::min(n_cols, (k + 1) * cb.width));
}

// Every tile's call, each with a guarded workspace of the planned region's bytes.
template <typename Fn>
void tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols, std::uint64_t region_bytes,
           Fn&& fn) {
  const planner::ColumnBlocks cb = planner::gemm_tiles(rows, inner, n_cols);
  const planner::ColumnBlocks blocks = planner::column_blocks(rows * inner, n_cols);
  BOOST_TEST_REQUIRE((rows / planner::kRowTile > blocks.n
                          ? cb.row_tiles == rows / planner::kRowTile && cb.n == 1
                          : cb.row_tiles == 1 && cb.n == blocks.n));
  std::int64_t covered = 0;
  for (std::int64_t b = 0; b < cb.blocks(); ++b) {
    const planner::GemmTile t = planner::gemm_tile(cb, b, rows, n_cols);
    if (cb.row_tiles > 1) BOOST_TEST(t.r1 - t.r0 >= planner::kRowTile);
    covered += (t.r1 - t.r0) * (t.j1 - t.j0);
    const GuardedWorkspace ws(region_bytes);
    fn(t, ws);
    BOOST_TEST(ws.guard_intact());
  }
  BOOST_TEST(covered == rows * n_cols);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_sizes)

BOOST_AUTO_TEST_CASE(a_linears_row_tiles_give_the_whole_calls_bits) {
  for (const Kernels* k : runnable_levels()) {
    const LinearKernels& lk = kernels_at<LinearKernels>(*k);
    for (const auto& [rows, in, out] : shapes()) {
      BOOST_TEST_CONTEXT(k->level << ", rows " << rows << ", in " << in << ", out " << out) {
        const auto x = random_floats(rows * in, 1), w = random_floats(in * out, 2, 0.1),
                   b = random_floats(out, 3), dz = random_floats(rows * out, 4);
        const planner::OpWorkspace fw = planner::linear_forward_workspace(rows, in, out);
        const planner::OpWorkspace bw = planner::linear_dx_workspace(rows, in, out);
        BOOST_TEST(fw.regions ==
                   std::min<std::int64_t>(planner::gemm_tiles(rows, in, out).blocks(), 32));

        std::vector<float> pre(static_cast<std::size_t>(rows * out), kUnwritten), act(pre);
        whole_rows(rows, in, out, [&](std::int64_t j0, std::int64_t j1) {
          const GuardedWorkspace ws(planner::linear_forward_call_workspace(rows, in, j0, j1));
          lk.forward_columns(popkit::config::Activation::kGelu, x.data(), w.data(), b.data(),
                             pre.data(), act.data(), rows, in, out, j0, j1, ws.data(), ws.bytes());
        });
        std::vector<float> tpre(pre.size(), kUnwritten), tact(pre.size(), kUnwritten);
        tiles(rows, in, out, fw.region_bytes, [&](const planner::GemmTile& t, const auto& ws) {
          lk.forward_columns(popkit::config::Activation::kGelu, x.data() + t.r0 * in, w.data(),
                             b.data(), tpre.data() + t.r0 * out, tact.data() + t.r0 * out,
                             t.r1 - t.r0, in, out, t.j0, t.j1, ws.data(), ws.bytes());
        });
        BOOST_TEST(same_bits(tpre, pre));
        BOOST_TEST(same_bits(tact, act));

        std::vector<float> dx(static_cast<std::size_t>(rows * in), kUnwritten);
        whole_rows(rows, out, in, [&](std::int64_t i0, std::int64_t i1) {
          const GuardedWorkspace ws(planner::linear_dx_call_workspace(rows, out, i0, i1));
          lk.dx_columns(dz.data(), w.data(), dx.data(), rows, in, out, i0, i1, ws.data(),
                        ws.bytes());
        });
        std::vector<float> tdx(dx.size(), kUnwritten);
        tiles(rows, out, in, bw.region_bytes, [&](const planner::GemmTile& t, const auto& ws) {
          lk.dx_columns(dz.data() + t.r0 * out, w.data(), tdx.data() + t.r0 * in, t.r1 - t.r0, in,
                        out, t.j0, t.j1, ws.data(), ws.bytes());
        });
        BOOST_TEST(same_bits(tdx, dx));
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
