// `poprun calibrate`: measures this machine with the engine's own kernels and runtime and
// turns the measurements into a device profile (config/device_profile.h) for the cost
// model (planner/cost.h), so `popplan plan` estimates what `poprun train` will measure.
// Each measurement times what a replica's thread does in a step, with every thread busy
// at once as replicas keep them, and is the median of three rounds:
//  - GEMMs: the linear kernels (forward, weight gradient, input gradient) at the shapes
//    of the MNIST plans, micro-batches 8 to 512; the profile's efficiency curve
//    (flops_per_second, half_m, half_n, half_k) is fitted to them by least squares, but
//    for the micro-batches of up to 8 rows, which take the small-batch kernels: their
//    rate, over all their FLOPs, is gemm.small_rows_efficiency;
//  - element-wise work: Adam (float32 and float16 first moment) and GELU's gradient;
//  - streaming memory: RemoteStore loads and stores of 1 MiB entries, and of 64 bytes;
//  - host streams: the pixels' normalisation of a host_load;
//  - collectives: the in-process all-reduce and all-gather on the engine's thread pool,
//    each followed by a pool run of the replicas (a segment), as the engine runs them;
//  - the thread barrier: a run of the pool once its threads have gone to sleep.
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

struct MachineCalibration {
  config::DeviceProfile profile;
  std::string cpu;      // the CPU's model name, as /proc/cpuinfo gives it
  std::string kernels;  // the engine's kernel level in use
  std::vector<GemmTiming> gemms;
  std::vector<Measured> measured;
  double gemm_fit_rms = 0.0;  // root mean square of log(fitted / measured rate)
  double seconds = 0.0;       // the calibration's wall time
};

// Measures and fits (a few seconds). Throws popkit::Error when a measurement fails.
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
