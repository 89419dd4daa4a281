// The planner's entry point: a validated Config in, the Plan out (DESIGN.md "The plan").
#pragma once

#include "config/config.h"
#include "planner/plan.h"

namespace popkit::planner {

// Builds the phased (or standard) plan with its memory per phase, buffers, tensors and
// cost estimate. The config must have passed validation. A plan that does not fit the
// device is still returned, with fits == false and the not_fitting report filled.
Plan build_plan(const config::Config& config);

}  // namespace popkit::planner
