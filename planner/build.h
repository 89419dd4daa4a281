// The planner's entry point: a validated Config in, the Plan out (DESIGN.md "The plan").
#pragma once

#include "config/config.h"
#include "planner/device_profile.h"
#include "planner/plan.h"

namespace popkit::planner {

// Builds the phased (or standard) plan with its memory per phase, buffers, tensors and
// cost estimate: the training program, or the evaluation program (forward only, see
// Program). The config must have passed validation. A plan that does not fit the
// device is still returned, with fits == false and the not_fitting report filled.
// A training plan's host memory counts the evaluation engine poprun runs beside it:
// `eval` is the config's evaluation plan when the caller has it (else it is built).
// `network`, when given, spreads the replicas over hosts and prices the collectives'
// cross-host bytes with it (planner/cost.h); plan.network then holds the traffic.
// The profile the config's device.profile was resolved to (Config::device.resolved);
// throws popkit::Error for a config built in code without one.
const DeviceProfile* device_profile(const config::Config& config);

Plan build_plan(const config::Config& config, Program program = Program::kTrain,
                const Plan* eval = nullptr, const NetworkProfile* network = nullptr);

// The training plan with its memory and cost estimate but without the host memory of
// poprun (which plans evaluation too), nor the not_fitting report: what the tuner
// compares, at half the work.
Plan build_plan_for_estimate(const config::Config& config);

}  // namespace popkit::planner
