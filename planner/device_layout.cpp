// First fit over one block, and the replay of a plan that sizes the block.
#include "planner/device_layout.h"

#include <iterator>
#include <limits>
#include <vector>

#include "base/error.h"
#include "planner/operands.h"

namespace popkit::planner {

FirstFit::FirstFit(std::uint64_t capacity) {
  if (capacity > 0) free_.emplace(0, capacity);
}

std::uint64_t FirstFit::allocate(std::uint64_t bytes) {
  const std::uint64_t n = rounded(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < n) continue;
    const std::uint64_t offset = it->first, left = it->second - n;
    free_.erase(it);
    if (left > 0) free_.emplace(offset + n, left);
    high_water_ = std::max(high_water_, offset + n);
    return offset;
  }
  return kNone;
}

void FirstFit::release(std::uint64_t offset, std::uint64_t bytes) {
  std::uint64_t n = rounded(bytes);
  auto next = free_.lower_bound(offset);
  POPKIT_ASSERT(next == free_.end() || next->first >= offset + n);
  if (next != free_.end() && next->first == offset + n) {  // merge with the range after
    n += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // and with the range before
    auto prev = std::prev(next);
    POPKIT_ASSERT(prev->first + prev->second <= offset);
    if (prev->first + prev->second == offset) {
      prev->second += n;
      return;
    }
  }
  free_.emplace(offset, n);
}

namespace {

// Replays allocs and frees with an unbounded allocator, recording the high-water mark.
// A plan that allocates a live tensor or frees a dead one is refused by the engine when
// it runs that op (with the op named); the replay only skips it.
class Replay {
 public:
  explicit Replay(const planner::Plan& plan)
      : plan_(plan), offsets_(plan.tensors.size(), FirstFit::kNone) {}

  void run(const std::vector<planner::Op>& ops) {
    for (const planner::Op& op : ops) {
      switch (op.kind) {
        case planner::OpKind::kAlloc: {
          const int t = planner::the_tensor(op);
          auto& at = offsets_.at(static_cast<std::size_t>(t));
          if (at == FirstFit::kNone) {
            at = fit_.allocate(tensor(t).nbytes);
            if (at == FirstFit::kNone) overflow_ = true;
          }
          break;
        }
        case planner::OpKind::kFree: {
          const int t = planner::the_tensor(op);
          auto& at = offsets_.at(static_cast<std::size_t>(t));
          if (at == FirstFit::kNone) break;
          fit_.release(at, tensor(t).nbytes);
          at = FirstFit::kNone;
          break;
        }
        case planner::OpKind::kRepeat:
          run(op.body);
          break;
        default:
          break;
      }
    }
  }

  [[nodiscard]] std::uint64_t high_water() const {
    return overflow_ ? FirstFit::kNone : fit_.high_water();
  }

 private:
  const planner::DeviceTensor& tensor(int t) const {
    return plan_.tensors.at(static_cast<std::size_t>(t));
  }

  const planner::Plan& plan_;
  FirstFit fit_{std::numeric_limits<std::uint64_t>::max() / 2};
  std::vector<std::uint64_t> offsets_;
  bool overflow_ = false;
};

}  // namespace

std::uint64_t device_block_bytes(const Plan& plan) {
  Replay replay(plan);
  replay.run(plan.setup);
  for (int step = 0; step < 2; ++step)
    for (const auto& phase : plan.phases) replay.run(phase.ops);
  return replay.high_water();
}

std::uint64_t device_block_bytes(const Plan& plan, int stage) {
  Replay replay(plan);
  std::vector<Op> setup;
  for (const Op& op : plan.setup)
    if (plan.tensors.at(static_cast<std::size_t>(the_tensor(op))).stage == stage)
      setup.push_back(op);
  replay.run(setup);
  for (int step = 0; step < 2; ++step)
    for (const auto& phase : plan.phases)
      if (phase.stage == stage) replay.run(phase.ops);
  return replay.high_water();
}

}  // namespace popkit::planner
