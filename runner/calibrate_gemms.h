// poprun calibrate's measurements of one linear layer's kernels (runner/calibrate.h): the
// GEMMs at the MNIST plans' shapes and the fit of the profile's efficiency curve to them, a
// lone replica's spread GEMMs, the accumulators' running mean, the caches' sweeps of the
// layer's operands and the cache probe. Internal to runner/calibrate*.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "config/device_profile.h"
#include "runner/calibrate.h"
#include "runner/calibrate_timing.h"

namespace popkit::runner::calibration {

// The width of the layer the caches' sweeps and the cache probe cycle through (512 x 512,
// as fc2 and fc3).
inline constexpr std::int64_t kSweepWidth = 512;
// The cache probe's batches: their own length, whatever the calibration's.
inline constexpr double kProbeBatchSeconds = 0.004;

// Times the three kernels of each of the MNIST plans' layers at micro-batches 8 to 512 on
// every thread at once, appending to `timings`.
void time_layers(Machine& machine, std::vector<GemmTiming>& timings);

// A lone replica's GEMMs spread over the threads, priced from `gemms` and a pool run
// against measured (config/device_profile.h gemm_spread_efficiency).
double spread_efficiency(Machine& machine, const std::vector<GemmTiming>& gemms,
                         double pool_run_seconds);

// What the accumulators' running mean adds per weight (config/device_profile.h
// accumulate_seconds).
double accumulate_seconds(Machine& machine);

// A 512 x 512 layer's kernels through 1 to 16 sets of operands, the given micro-batches'
// timings summed.
CacheSweep cache_sweep(Machine& machine, std::vector<std::int64_t> micro_batches);

// The cache probe on `machine`'s threads (runner/calibrate.h cache_probe_seconds).
double cache_probe(Machine& machine);

// A GEMM sweep's cold rate: per byte of the weight-sized operand its kernels read, what
// the coldest set adds.
double cold_operand_rate(const CacheSweep& sweep, const ColdRamp& ramp);

// Fits the profile's GEMM rate and curve to `all` (filling their fitted rates); returns the
// root mean square of log(fitted / measured time).
double fit_gemms(std::vector<GemmTiming>& all, config::DeviceProfile& p);

}  // namespace popkit::runner::calibration
