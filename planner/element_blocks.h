// How an element-wise pass over one replica's tensor is cut for the engine's pool: the
// activation's backward, the running mean's division, the optimizer's step. Like the
// GEMMs' column blocks (workspace.h), the blocks depend on the element count only, never
// on the threads, and each element's result is computed alone, so a pass gives the same
// bits on any number of threads. The engine runs the blocks on the pool when one
// replica has the threads (Schedule::spread_gemms); the cost model prices its busiest
// thread's share.
#pragma once

#include <algorithm>
#include <cstdint>

namespace popkit::planner {

// 32,768 floats (128 KiB) a block: a multiple of every kernel's packet and of the
// activations' 256-float blocks, so no element falls in a block's scalar tail that a
// pass over the whole tensor would not put there.
inline constexpr std::int64_t kElementBlock = std::int64_t{1} << 15;

struct ElementBlocks {
  std::int64_t n = 1;      // blocks
  std::int64_t width = 0;  // elements a block (the last one may hold fewer)
  // The share of the pass's time its busiest thread takes on `threads` threads.
  [[nodiscard]] double busiest_share(std::int64_t threads) const {
    if (threads <= 1 || n <= 1) return 1.0;
    return static_cast<double>((n + threads - 1) / threads) / static_cast<double>(n);
  }
};

// One block when there are fewer than two blocks' worth of elements.
[[nodiscard]] inline ElementBlocks element_blocks(std::int64_t elements) {
  if (elements < 2 * kElementBlock) return {1, std::max<std::int64_t>(elements, 0)};
  return {(elements + kElementBlock - 1) / kElementBlock, kElementBlock};
}

}  // namespace popkit::planner
