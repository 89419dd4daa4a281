// Live-byte bookkeeping; an unbalanced release is a bug in the executor, not input.
#include "engine/runtime/memory_account.h"

#include <algorithm>

#include "base/error.h"

namespace popkit::engine {

void MemoryAccount::allocate(std::uint64_t bytes, TensorClass cls, bool always_live) {
  live_ += bytes;
  by_class_[static_cast<std::size_t>(cls)] += bytes;
  if (always_live) always_live_ += bytes;
  peak_ = std::max(peak_, live_);
}

void MemoryAccount::release(std::uint64_t bytes, TensorClass cls, bool always_live) {
  auto& c = by_class_[static_cast<std::size_t>(cls)];
  POPKIT_ASSERT(live_ >= bytes && c >= bytes);
  live_ -= bytes;
  c -= bytes;
  if (always_live) {
    POPKIT_ASSERT(always_live_ >= bytes);
    always_live_ -= bytes;
  }
}

void PhaseSampler::begin(const MemoryAccount& account) {
  memory_ = PhaseMemory{};
  any_ = false;
  sample(account);
}

void PhaseSampler::sample(const MemoryAccount& account) {
  if (!any_ || account.live() > memory_.peak) {
    memory_.peak = account.live();
    memory_.peak_by_class = account.live_by_class();
    any_ = true;
  }
  memory_.always_live = account.always_live();
  memory_.not_always_live = memory_.peak - memory_.always_live;
}

}  // namespace popkit::engine
