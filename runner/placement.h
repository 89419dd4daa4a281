// Where the machine has put this process's CPUs: the round trip of a cache line between
// two of them. A virtual machine's CPUs move between the host's cores as its load
// changes: on one last-level cache a round trip takes tens of nanoseconds, across two
// (another chiplet or socket) several times that, and then the replicas' collectives and
// copies cross it too and a step can take twice as long. `poprun calibrate` records the
// round trip in the profile and `poprun train` in the run file, at its start and end, so
// an estimate is compared with a run on the machine it was made for (popreport compare,
// bench/estimate.sh).
#pragma once

#include <vector>

namespace popkit::runner {

// The first `n` CPUs this process may run on (fewer when it may use fewer), lowest first.
std::vector<int> allowed_cpus(int n);
// Pins the calling thread to `cpu`; false when the system refuses.
bool pin_this_thread(int cpu);

// The fastest of a few batches of round trips of one cache line between the first two
// CPUs this process may run on, each side on a thread of its own pinned to its CPU; 0
// when the process has fewer than two CPUs, or the two could not run together within a
// quarter second in any of four attempts (a busy machine can keep one thread off its CPU
// for a whole attempt). Takes a few milliseconds, about a second at most; the engine's
// threads are not moved. Whether two
// round trips are a placement apart: config::placement_differs.
double core_round_trip_seconds();

}  // namespace popkit::runner
