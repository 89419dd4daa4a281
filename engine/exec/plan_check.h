// The engine's checks of a plan before it runs one: it fits, every tensor's shape agrees
// with its element and byte counts, and every op's operands are tensors of the plan with
// the shapes and dtypes its kind declares (a layer's operands, planner/layer_ops.h; an
// optimizer's state, planner/optimizer_kinds.h): no kind writes checks of its own. A plan
// that fails gets a popkit::Error naming the phase and the op.
#pragma once

#include "planner/plan.h"

namespace popkit::engine {

void check_plan(const planner::Plan& plan);

}  // namespace popkit::engine
