// poprun calibrate's measurements beyond the GEMMs (runner/calibrate.h): element-wise
// work (Adam, GELU's gradient) on warm and cold state, the remote store's copies and their
// sweep through the caches, host streams, the in-process collectives, the thread pool's
// runs and a compute op's overhead. Internal to runner/calibrate*.cpp.
#pragma once

#include <cstdint>

#include "runner/calibrate.h"
#include "runner/calibrate_timing.h"

namespace popkit::runner::calibration {

// A link's figures: bytes per second and seconds per transfer.
struct Link {
  double bytes_per_second = 0.0;
  double latency_seconds = 0.0;
};

// The entries of the remote store's copy sweep: 128 KiB (a micro-batch's activations in
// the plans are 16 to 512 KiB).
inline constexpr std::uint64_t kCopyEntry = 128 << 10;

// Element-wise FLOP/s: Adam (float32 and float16 first moments) and GELU's gradient.
double vector_rate(Machine& machine);
// The optimizer's step on state that comes from memory, FLOP/s.
double cold_vector_rate(Machine& machine);
// Streaming memory: RemoteStore loads and stores of 1 MiB and of 64-byte entries.
Link streaming(Machine& machine);
// The remote store's copies through stores of 2 to 64 MiB.
CacheSweep copy_sweep(Machine& machine);
// Host streams: the pixels' normalisation of a host_load.
Link host(Machine& machine);
// The in-process all-reduce and all-gather, each followed by a pool run of the replicas.
Link collectives(Machine& machine);
// The median of `runs` runs of the thread pool, each after `idle` seconds of computing.
double pool_run(Machine& machine, double idle, int runs);
// A compute op's cost beyond its work.
double op_overhead(Machine& machine);

}  // namespace popkit::runner::calibration
