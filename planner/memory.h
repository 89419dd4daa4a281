// The memory model: per replica, the bytes live on device after each op of the plan.
//
// Definition (also in schemas/plan.schema.json, "PhaseMemory"): a device tensor is live
// from its kAlloc to its kFree (always-live tensors from `setup` on, never freed). Live
// bytes = the sum of nbytes of live tensors. They are sampled at each phase's start and
// after every op; inside a kRepeat after every op of one iteration (repeat bodies never
// allocate, so every iteration is the same). A phase's peak is its largest sample,
// always_live the bytes of always-live tensors, not_always_live = peak - always_live,
// peak_by_class the live bytes per class at the first sample that reaches the peak.
// The program peak is the largest phase peak (setup only allocates always-live bytes).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/plan.h"

namespace popkit::planner {

struct MemoryWalk {
  // Per phase, the index of the op after which the peak is first reached (-1: at the
  // phase's start).
  std::vector<std::int64_t> peak_op;
};

// Fills every phase's `memory`, and the plan's peak_bytes, peak_phase and
// always_live_bytes, streaming_bytes. Checks the plan as it walks: a tensor used or
// freed while not live, allocated twice, allocated inside a repeat, or still live at the
// end of the step (other than always-live ones) throws popkit::Error naming the phase,
// the op and the tensor.
MemoryWalk analyse_memory(Plan& plan);

// The same checks without filling anything in (for a plan read from a file).
void check_plan(const Plan& plan);

// The tensors live at a phase's peak sample, largest first (for the not-fitting report).
std::vector<int> live_tensors_at_peak(const Plan& plan, const MemoryWalk& walk, int phase);

}  // namespace popkit::planner
