// What the kernel tests at awkward sizes share (tests/engine/kernel_sizes*_test.cpp): the
// levels this CPU runs, a mismatch count that reports one line per case, and the float
// rounding bounds their tolerances are built from.
//
// Tolerances are worst-case float rounding bounds, not fitted constants: k terms summed
// in float in any order, each product rounded once or fused, lie within (k + 1) u of the
// sum of |terms|, u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms,
// 3.1). A reference in double adds 2^-53 per operation, far below that.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/tensor/init.h"
#include "planner/workspace.h"

namespace popkit::test {

constexpr double kU = 0x1.0p-24;  // float's unit roundoff
// What an output holds before a kernel writes it: NaN, so a kernel that reads an output
// before writing it (a stale accumulator at s = 0) shows, and columns outside the range
// must keep these bits.
constexpr float kUnwritten = std::numeric_limits<float>::quiet_NaN();

inline std::vector<float> random_floats(std::int64_t n, std::uint64_t key, double std = 1.0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  engine::fill_normal(v.data(), n, 0.0, std, key);
  return v;
}

inline std::vector<const engine::Kernels*> runnable_levels() {
  std::vector<const engine::Kernels*> out;
  for (const engine::Kernels* k : engine::kernel_levels())
    if (engine::runs_here(*k)) out.push_back(k);
  return out;
}

// The elements outside their tolerance, counted, and the first described, so a case
// reports one line however many elements it checks.
struct Mismatches {
  std::int64_t count = 0;
  std::string first;

  void near(double got, double want, double tol, const char* what, std::int64_t r, std::int64_t c) {
    if (std::abs(got - want) <= tol) return;  // false for NaN too
    note(fmt::format("{}[{}, {}] = {}, want {} (tolerance {:.3g})", what, r, c, got, want, tol));
  }
  void same_bits(float got, float want, const char* what, std::int64_t r, std::int64_t c) {
    if (std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want)) return;
    note(fmt::format("{}[{}, {}] = {}, want {} bit for bit", what, r, c, got, want));
  }
  void note(std::string what) {
    if (count++ == 0) first = std::move(what);
  }
};

inline void expect_none(const Mismatches& m) {
  BOOST_TEST(m.count == 0, m.count << " elements wrong, the first: " << m.first);
}

// A sum of k float terms, in any order, fused or not (see the top of this file).
inline double sum_tolerance(std::int64_t k, double magnitude) {
  return static_cast<double>(k + 1) * kU * magnitude;
}

// A reference sum in double and the sum of its terms' magnitudes, which bounds the error
// of the same sum in float.
struct Sum {
  double value = 0, magnitude = 0;
  void add(double term) {
    value += term;
    magnitude += std::abs(term);
  }
};

// A kernel call's workspace of exactly `bytes` (64-byte aligned, as the engine's), filled
// with a byte pattern and followed by a guard of the same pattern: a kernel that packs
// past the planned bound (planner/workspace.h) changes the guard; `touched` is one past
// the last byte it changed, so a test can also show that the bound is not loose.
class GuardedWorkspace {
 public:
  static constexpr std::byte kFill{0xA5};
  static constexpr std::size_t kGuard = 4096;

  explicit GuardedWorkspace(std::uint64_t bytes)
      : bytes_(bytes),
        data_(static_cast<std::byte*>(::operator new (bytes + kGuard, std::align_val_t{64}))) {
    std::fill(data_.get(), data_.get() + bytes + kGuard, kFill);
  }
  [[nodiscard]] float* data() const { return reinterpret_cast<float*>(data_.get()); }
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }
  [[nodiscard]] bool guard_intact() const {
    return std::all_of(data_.get() + bytes_, data_.get() + bytes_ + kGuard,
                       [](std::byte b) { return b == kFill; });
  }
  [[nodiscard]] std::uint64_t touched() const {
    for (std::uint64_t i = bytes_ + kGuard; i > 0; --i)
      if (data_.get()[i - 1] != kFill) return i;
    return 0;
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete (p, std::align_val_t{64}); }
  };
  std::uint64_t bytes_;
  std::unique_ptr<std::byte, Free> data_;
};

// A workspace large enough for any one call of the linear kernels.
inline std::uint64_t any_workspace_bytes() {
  return planner::gemm_workspace_bytes(planner::kGemmMc, planner::kGemmKc, planner::kGemmNc);
}
inline float* any_workspace() {
  static const GuardedWorkspace ws(any_workspace_bytes());
  return ws.data();
}

}  // namespace popkit::test
