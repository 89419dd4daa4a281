// Whether a plan's time estimate can be shown: a device profile whose figures price some
// op at an infinite or undefined time (a parameter set without its partner, a rate of
// 1e-300) gives "inf ms, 0 samples/s", and JSON has no inf (it wrote null). Every tool
// that prints or writes an estimate asks first and refuses the plan instead.
//
//   if (std::string why = estimate_problem(plan); !why.empty()) ...   // refuse: why
#pragma once

#include <string>

#include "planner/plan.h"

namespace popkit::planner {

// "" when the step time and every phase's are finite and >= 0 and the samples/s finite
// and > 0; else what is wrong, naming the device profile and the first phase at fault.
std::string estimate_problem(const Plan& plan);

}  // namespace popkit::planner
