// Per-replica accounts of device memory and of streaming memory. Every device tensor
// of the plan is allocated and released through a MemoryAccount, and PhaseSampler
// samples it exactly where plan.h's PhaseMemory says (phase start, after every op), so
// the measured peak per phase, always-live bytes and bytes by class can be compared with
// the planner's to the byte.
#pragma once

#include <cstdint>

#include "planner/plan.h"

namespace popkit::engine {

using planner::ClassBytes;
using planner::PhaseMemory;
using planner::TensorClass;

class MemoryAccount {
 public:
  void allocate(std::uint64_t bytes, TensorClass cls, bool always_live);
  void release(std::uint64_t bytes, TensorClass cls, bool always_live);

  [[nodiscard]] std::uint64_t live() const { return live_; }
  [[nodiscard]] std::uint64_t always_live() const { return always_live_; }
  [[nodiscard]] const ClassBytes& live_by_class() const { return by_class_; }
  [[nodiscard]] std::uint64_t peak() const { return peak_; }  // over the whole program

 private:
  std::uint64_t live_ = 0;
  std::uint64_t always_live_ = 0;
  std::uint64_t peak_ = 0;
  ClassBytes by_class_{};
};

// One phase's samples: `peak` is the largest, `peak_by_class` the split at the first
// sample that reaches it, `not_always_live` = peak - always_live.
class PhaseSampler {
 public:
  void begin(const MemoryAccount& account);
  void sample(const MemoryAccount& account);
  [[nodiscard]] const PhaseMemory& memory() const { return memory_; }

 private:
  PhaseMemory memory_;
  bool any_ = false;
};

// Streaming memory per replica, by class: the bytes of the remote buffers it holds.
struct StreamingAccount {
  std::uint64_t bytes = 0;
  ClassBytes by_class{};
};

}  // namespace popkit::engine
