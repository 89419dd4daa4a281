// The engine's checks of a plan before it runs one: it fits, every tensor's shape agrees
// with its element and byte counts, and every op's operands are tensors of the plan with
// the shapes and dtypes its kind needs (the layer kinds check their own ops,
// engine/layer_kinds.h). A plan that fails gets a popkit::Error naming the phase and the op.
#pragma once

#include "engine/tensor/optimizer.h"
#include "planner/plan.h"

namespace popkit::engine {

void check_plan(const planner::Plan& plan, const OptimizerKernel& optimizer);

}  // namespace popkit::engine
