// Stopping a training step part-way (EngineOptions::stop_requested): a step may be
// abandoned while no optimizer op of it has run, when every variable (weights and
// optimizer state) still holds the previous step's values, and never after. Every op of
// the step asks the gate before it runs, on whichever thread runs it (a replica's task,
// the IO thread, a pipeline stage's worker, the caller's collectives); the gate's one
// atomic decides between "abandoned" and "updating", so no replica updates while
// another abandons, and a thread that runs no op of the step waits on no one.
// Over several processes a rank never abandons a step on its own (the others would wait
// for it in the step's next collective): asked to stop, it skips the step's ops but its
// collectives until the next point where the ranks agree (EngineState::agree_on_stop),
// which abandons the step, as this rank asks; so the stop waits for no more compute
// than it would in one process. Once the ranks agree to go on into the update
// (commit()), every op runs.
#pragma once

#include <atomic>
#include <functional>

#include "base/error.h"
#include "engine/engine.h"
#include "planner/plan.h"

namespace popkit::engine {

class StepGate {
 public:
  // A step begins: `stop` (may be null or empty: the step runs to its end) is polled
  // before each of its ops until its update begins. `skip`: over several processes, a
  // stop skips ops (before() returns false) instead of abandoning the step.
  void open(const std::function<bool()>* stop, bool skip = false) {
    stop_ = stop != nullptr && *stop ? stop : nullptr;
    skip_ = skip;
    state_.store(stop_ != nullptr ? kOpen : kIdle, std::memory_order_relaxed);
  }
  // The ranks agreed to go on into the update: no op is skipped from here.
  void commit() {
    int state = kOpen;
    state_.compare_exchange_strong(state, kUpdating, std::memory_order_acq_rel);
  }
  // Outside a step (set-up, evaluation) every op runs.
  void close() { state_.store(kIdle, std::memory_order_relaxed); }

  // Open for one step's scope, closed when it ends, by its last op or by a throw.
  class Step {
   public:
    Step(StepGate& gate, const std::function<bool()>* stop, bool skip = false) : gate_(gate) {
      gate_.open(stop, skip);
    }
    ~Step() { gate_.close(); }
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;

   private:
    StepGate& gate_;
  };

  // Whether the step may still be abandoned: it is open and its update has not begun.
  [[nodiscard]] bool open() const { return state_.load(std::memory_order_acquire) == kOpen; }

  // Abandons the step now, unless its update began (then it returns): throws StepAbandoned,
  // and so does every op of the step asking before() after it.
  void abandon(std::int64_t step) {
    int state = kOpen;
    if (state_.compare_exchange_strong(state, kAbandoned, std::memory_order_acq_rel) ||
        state == kAbandoned)
      throw StepAbandoned(step);
  }

  // Before an op of kind `kind`: whether it runs (false: skipped, over several processes
  // after a stop; never a collective, `may_skip` false, which the other ranks join);
  // throws StepAbandoned when the step is abandoned, which an optimizer op decides
  // against for good (the update began) and a stop request before it decides for.
  [[nodiscard]] bool before(planner::OpKind kind, std::int64_t step, bool may_skip = true) {
    int state = state_.load(std::memory_order_acquire);
    if (state == kIdle || state == kUpdating) return true;
    if (state == kOpen) {
      const bool update = kind == planner::OpKind::kOptimizerStep;
      if (!update && !(*stop_)()) return true;
      if (skip_ && !update) return !may_skip;
      if (state_.compare_exchange_strong(state, update ? kUpdating : kAbandoned,
                                         std::memory_order_acq_rel)) {
        if (update) return true;
      } else if (state == kUpdating) {
        return true;
      }
    }
    throw StepAbandoned(step);
  }

 private:
  enum : int { kIdle, kOpen, kUpdating, kAbandoned };
  std::atomic<int> state_{kIdle};
  const std::function<bool()>* stop_ = nullptr;
  bool skip_ = false;
};

}  // namespace popkit::engine
