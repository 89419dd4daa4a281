// How poprun calibrate times a figure (runner/calibrate.h): seconds per call as the median
// of batches of calls, on one thread or on every thread of the engine's pool at once, and
// the operand buffers the measurements use, aligned as the engine's device blocks are.
// Internal to runner/calibrate*.cpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/runtime/aligned_block.h"
#include "engine/runtime/thread_pool.h"
#include "planner/workspace.h"

namespace popkit::runner::calibration {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds per call, given `calls(n)` that makes n calls: the median of 5 batches of
// calls, each batch at least `batch_seconds` long. The median, not the minimum: a shared
// machine's steps see its noise too, and the profile should price the steps poprun will
// measure.
template <typename Calls>
double seconds_per_call(Calls&& calls, double batch_seconds) {
  calls(1);  // caches, page faults
  std::int64_t n = 1;
  for (;;) {
    const auto t0 = Clock::now();
    calls(n);
    if (since(t0) >= batch_seconds || n >= (std::int64_t{1} << 24)) break;
    n *= 2;
  }
  std::vector<double> t;
  for (int b = 0; b < 5; ++b) {
    const auto t0 = Clock::now();
    calls(n);
    t.push_back(since(t0) / static_cast<double>(n));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Seconds per call of `f` on this thread.
template <typename F>
double per_call(F&& f, double batch_seconds) {
  return seconds_per_call(
      [&](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) f();
      },
      batch_seconds);
}

// Where the measurements run: the threads replicas will run on, every one busy at once
// with its own data, as the engine keeps them (R >= threads: a replica per thread; R = 1:
// a GEMM's column blocks on every thread). Cores that share a physical core, caches or
// memory bandwidth then show what that costs a replica.
struct Machine {
  int threads = 1;
  double batch = 0.004;
  engine::ThreadPool pool;
  Machine(int n_threads, double batch_seconds)
      : threads(n_threads), batch(batch_seconds), pool(n_threads) {}

  // Seconds per call of f(states[t]) when every thread t calls it at once, one call
  // after another.
  template <typename State, typename F>
  double per_call_on_all(std::vector<State>& states, F&& f) {
    return seconds_per_call(
        [&](std::int64_t n) {
          pool.run(threads, [&](std::int64_t t) {
            for (std::int64_t i = 0; i < n; ++i) f(states[static_cast<std::size_t>(t)]);
          });
        },
        batch);
  }
};

// A float buffer, 64-byte aligned as the engine's device blocks are, filled with small
// values (no subnormals, no overflow).
struct Floats {
  explicit Floats(std::int64_t n)
      : bytes(static_cast<std::uint64_t>(std::max<std::int64_t>(n, 1)) * 4), block(bytes) {
    for (std::int64_t i = 0; i < n; ++i) data()[i] = 0.01f * static_cast<float>(i % 97 - 48);
  }
  [[nodiscard]] float* data() const { return reinterpret_cast<float*>(block.data()); }
  std::uint64_t bytes;
  engine::AlignedBlock block;
};

struct Workspace {
  explicit Workspace(std::uint64_t n) : bytes(n), block(std::max<std::uint64_t>(n, 64)) {}
  explicit Workspace(const planner::OpWorkspace& w) : Workspace(w.bytes()) {
    region_bytes = w.region_bytes;
  }
  [[nodiscard]] float* data() const {
    return bytes == 0 ? nullptr : reinterpret_cast<float*>(block.data());
  }
  // The region of the column block that starts at column j0 (engine/layer_kinds.cpp).
  [[nodiscard]] float* of(std::int64_t j0) const { return at(j0 / planner::kColumnBlock); }
  // Region `region` (a GEMM tile's, planner::GemmTile).
  [[nodiscard]] float* at(std::int64_t region) const {
    if (bytes == 0) return nullptr;
    return data() + static_cast<std::uint64_t>(region) * region_bytes / 4;
  }
  std::uint64_t bytes;
  std::uint64_t region_bytes = 0;
  engine::AlignedBlock block;
};

}  // namespace popkit::runner::calibration
