// `poprun calibrate`: measures this machine with the engine's own kernels and runtime and
// turns the measurements into a device profile (config/device_profile.h) for the cost
// model (planner/cost.h), so `popplan plan` estimates what `poprun train` will measure.
// Each measurement times what a replica's thread does in a step, with every thread busy
// at once as replicas keep them, and is the median of five passes, each of which measures
// every figure once (so a few seconds of a moved or busy machine spoil a pass, not a
// figure), and records where the machine had its CPUs (runner/placement.h):
//  - caches: one layer's kernels with each thread cycling through 1 to 16 sets of
//    operands (micro-batches 16 and 64, and 8 for the small-batch kernels), and the
//    remote store's copies through stores of 2 to 64 MiB: what cold data adds and the
//    working sets over which it turns cold (the caches.* parameters);
//  - GEMMs: the linear kernels (forward, weight gradient, input gradient), called in the
//    engine's column blocks, at the shapes of the MNIST plans, micro-batches 8 to 512; the
//    profile's efficiency curve
//    (flops_per_second, half_m, half_n, half_k) is fitted to them by least squares, but
//    for the micro-batches of up to 8 rows, which take the small-batch kernels: their
//    rate, over all their FLOPs, is gemm.small_rows_efficiency;
//  - element-wise work: Adam (float32 and float16 first moment) and GELU's gradient;
//  - streaming memory: RemoteStore loads and stores of 1 MiB entries, and of 64 bytes;
//  - host streams: the pixels' normalisation of a host_load;
//  - collectives: the in-process all-reduce and all-gather on the engine's thread pool,
//    each followed by a pool run of the replicas (a segment), as the engine runs them;
//  - the thread pool: a run once its threads have gone to sleep, and one right after
//    another, its threads still spinning;
//  - the cache probe (cache_probe_seconds below): not priced, a run is checked against it.
//
//   MachineCalibration c = calibrate_machine({});
//   std::string yaml = calibrated_profile_yaml(c);  // config::load_profile_string reads it
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "config/device_profile.h"

namespace popkit::runner {

struct CalibrateOptions {
  int n_threads = 0;  // threads replicas run on; 0 = the machine's cores
  std::string name = "cpu-calibrated";
  double seconds_per_batch = 0.004;  // each timing: 5 batches of calls at least this long
  // Every figure is the median of this many passes, each measuring every figure once:
  // fewer make a quicker calibration that a burst of other work moves more.
  int passes = 5;
};

// One GEMM timed: [m, k] x [k, n], seconds per call, and the fitted curve's rate there.
struct GemmTiming {
  std::string kernel;  // "forward", "weight grad", "input grad"
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t rows = 0;  // the micro-batch: m, or k for the weight gradient
  double seconds = 0.0;
  double fitted_flops_per_second = 0.0;
  [[nodiscard]] double flops_per_second() const {
    return 2.0 * static_cast<double>(m * n * k) / seconds;
  }
};

// A figure measured outside the GEMMs: what, its value and its unit.
struct Measured {
  std::string what;
  double value = 0.0;
  std::string unit;
};

// The caches: one layer's kernels, every thread cycling through more and more sets of
// operands (runner/calibrate.cpp cache_sweep).
struct CacheSweep {
  std::vector<std::int64_t> rows;  // GEMMs: the micro-batches, their timings summed; copies: none
  struct Point {
    double working_set_bytes = 0.0;  // per thread, the mean over the micro-batches
    double seconds = 0.0;            // per call of the kernels, summed over the micro-batches
    double cold_fraction = 0.0;      // of the largest set's extra time, this set's
  };
  std::vector<Point> points;
};

// A ramp of cold data (config/device_profile.h *_cold_fraction): its ends, and what the
// coldest set adds to the warmest's time.
struct ColdRamp {
  double warm_bytes = 0.0, cold_bytes = 0.0, extra_seconds = 0.0;
};

// The ramp a sweep shows, its points' cold_fraction filled in: the working sets at which
// a quarter and three quarters of the extra time is first paid (interpolated between
// sets in log(working set)) give its ends, the line through them extended to 0 and 1.
// All 0 when the last set is no slower than the first.
ColdRamp fit_ramp(CacheSweep& sweep);

struct MachineCalibration {
  config::DeviceProfile profile;
  std::string cpu;      // the CPU's model name, as /proc/cpuinfo gives it
  std::string kernels;  // the engine's kernel level in use
  std::vector<GemmTiming> gemms;
  CacheSweep cache;             // the GEMMs, micro-batches 16 and 64
  CacheSweep small_rows_cache;  // the small-batch kernels, micro-batch 8
  CacheSweep copy_cache;        // the remote store's copies
  std::vector<Measured> measured;
  double gemm_fit_rms = 0.0;        // root mean square of log(fitted / measured rate)
  std::vector<double> round_trips;  // each pass's core round trip (runner/placement.h)
  // Whether the machine moved its CPUs between passes: two passes a placement apart.
  [[nodiscard]] bool moved() const;
  double seconds = 0.0;  // the calibration's wall time
};

// The cache probe: how much of the shared last-level cache the host leaves this
// process's threads now. Seconds per call of a 512 x 512 layer's three small-batch
// kernels (8 rows), each of `n_threads` threads cycling through 4 sets of operands of its
// own (8.3 MiB), the median of 5 batches (some tens of milliseconds in all). The profile records it
// (config::DeviceProfile::cache_probe_seconds) and poprun train at a run's start and end.
double cache_probe_seconds(int n_threads);

// Measures and fits (about 30 seconds in five passes). Throws popkit::Error when a
// measurement fails or options.passes is below 1.
MachineCalibration calibrate_machine(const CalibrateOptions& options);

// The profile file: a header saying how, where and when it was measured, then the
// profile (config::profile_to_yaml).
std::string calibrated_profile_yaml(const MachineCalibration& c);

// What was measured: the GEMM table (measured and fitted rates), the other figures, and
// the profile's parameters.
void print_machine_calibration(std::ostream& out, const MachineCalibration& c);

struct CalibrateCommand {
  std::string output;  // the profile file to write (-o)
  CalibrateOptions options;
};

// `poprun calibrate -o FILE`: measures, writes the profile (atomically) and prints what
// was measured. Returns 0, or 2 when FILE cannot be a file (a folder, or in a folder that
// does not exist), said before measuring; a failure to write throws popkit::Error.
int run_calibrate_command(const CalibrateCommand& command, std::ostream& out, std::ostream& err);

}  // namespace popkit::runner
