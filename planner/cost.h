// The cost model: per op, per replica, the FLOPs and the bytes it moves (host, remote,
// collective), then a time estimate from a device profile. Collectives move what the
// engine's direct algorithms move (engine/runtime/collectives.h), sent + received, the
// mean over a group's G members rounded down to the byte: all-reduce 4 (G-1) / G of the
// tensor, all-gather 2 (G-1) / G of the full tensor, reduce-scatter 2 (G-1) / S of the
// scattered tensor (S shards); sent and received overlap on the links.
#pragma once

#include <cstdint>

#include "planner/device_profile.h"
#include "planner/plan.h"

namespace popkit::planner {

// Fills flops, host_bytes, remote_bytes and collective_bytes of every op (a repeat:
// its body's sums times steps).
void annotate_costs(Plan& plan);

// Fills every phase's estimated_seconds and the plan's estimated_step_seconds and
// estimated_samples_per_second. With io_mode io or io_overlapped, `plan.io_tiles` of the
// profile's tiles stream data and the rest compute; io_overlapped overlaps a repeat's
// streams with its compute: steps * max(compute, io) + min(compute, io).
void estimate_time(Plan& plan, const DeviceProfile& profile);

}  // namespace popkit::planner
