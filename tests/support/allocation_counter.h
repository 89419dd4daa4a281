// Heap allocations of the calling thread, counted by the test executables' replacement
// of the global operator new: a measure of how work grows with the input that, unlike a
// clock, does not depend on the machine's load (bench/ has the timings).
//
//   const AllocationCount used = count_allocations([&] { build_plan(config); });
//   // used.count, used.bytes
//
// Only the calling thread's allocations count, so work on other threads (a thread
// pool's) stays out of the figure; run what is measured on one thread.
#pragma once

#include <cstdint>

namespace popkit::test {

struct AllocationCount {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
};

// The calling thread's allocations so far (operator new, every form that is not
// over-aligned).
AllocationCount thread_allocations();

template <typename Fn>
AllocationCount count_allocations(Fn&& fn) {
  const AllocationCount before = thread_allocations();
  fn();
  const AllocationCount after = thread_allocations();
  return {after.count - before.count, after.bytes - before.bytes};
}

}  // namespace popkit::test
