// A replica's device memory as one block, the way a device has it: the engine gives
// every tensor the plan allocates an offset in the block, and a freed tensor's bytes
// serve the next allocation that fits (first fit, lowest address). So the host memory
// behind a replica is about its planned peak, not the sum of every tensor the plan ever
// allocates, and each phase works in the bytes the previous phase just left warm in the
// caches.
//
// The block's size comes from replaying the plan's allocs and frees (setup, then two
// optimizer steps of phases) through the allocator the engine runs: the replay and the
// run see the same sequence, so the run never needs more. The memory account
// (engine/runtime/memory_account.h) still counts tensor bytes exactly as planned; the
// block adds only first fit's fragmentation and 64-byte alignment. The host memory
// estimate (host_memory.h) counts the block.
#pragma once

#include <cstdint>
#include <map>

#include "planner/plan.h"

namespace popkit::planner {

// First fit over [0, capacity): offsets aligned to kAlign, free neighbours merged.
class FirstFit {
 public:
  static constexpr std::uint64_t kAlign = 64;

  explicit FirstFit(std::uint64_t capacity);

  // The offset of `bytes` (at least kAlign), or kNone when no free range fits.
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  [[nodiscard]] std::uint64_t allocate(std::uint64_t bytes);
  void release(std::uint64_t offset, std::uint64_t bytes);

  // The end of the highest range ever handed out.
  [[nodiscard]] std::uint64_t high_water() const { return high_water_; }

  [[nodiscard]] static std::uint64_t rounded(std::uint64_t bytes) {
    if (bytes > kNone - kAlign) return kNone;  // no block holds it
    return bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  }

 private:
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> bytes, disjoint, not adjacent
  std::uint64_t high_water_ = 0;
};

// The bytes a replica's block needs for `plan`: the high-water mark of first fit over the
// plan's allocs and frees (setup, then the phases twice; repeat bodies once each, as
// their allocs and frees balance). 2^64 - 1 when the tensors' sizes overflow 2^63.
[[nodiscard]] std::uint64_t device_block_bytes(const Plan& plan);

// A pipelined plan: the block of stage `stage`'s device, replaying the setup's allocs of
// that stage's tensors, then its program twice.
[[nodiscard]] std::uint64_t device_block_bytes(const Plan& plan, int stage);

}  // namespace popkit::planner
