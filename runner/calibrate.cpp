// `poprun calibrate`: the passes of measurements (runner/calibrate_gemms.h,
// runner/calibrate_runtime.h), the profile their medians give, and its printout.
#include "runner/calibrate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/output_file.h"
#include "config/yaml/profile.h"
#include "engine/kernels/kernels.h"
#include "reports/run_record.h"
#include "runner/calibrate_gemms.h"
#include "runner/calibrate_runtime.h"
#include "runner/calibrate_timing.h"
#include "runner/placement.h"

namespace popkit::runner {
namespace {

using namespace calibration;

// Every figure is measured once a pass, the passes (CalibrateOptions::passes) one after
// another, and is the median of its passes' values: on a shared machine a burst of
// someone else's work spoils one pass of a figure, not the figure; and a virtual machine
// that moves its CPUs for a few seconds (runner/placement.h) moves a pass or two, not all
// of one figure's rounds.
// The least accumulate_seconds written: a profile's 0 means "not measured".
constexpr double kAccumulateFloor = 1e-15;

// The median of f(0), ..., f(n - 1).
template <typename F>
double median_of(int n, F&& f) {
  std::vector<double> v;
  for (int r = 0; r < n; ++r) v.push_back(f(r));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One pass: every figure once.
struct Pass {
  std::vector<GemmTiming> gemms;
  CacheSweep cache, small_rows_cache, copy_cache;
  double vector = 0.0, cold_vector = 0.0, accumulate = 0.0;
  Link streaming, host, collectives;
  double op_overhead = 0.0, barrier = 0.0, pool_run = 0.0, spread = 0.0;
  double round_trip = 0.0;
  double cache_probe = 0.0;
};

Pass measure_pass(Machine& machine) {
  Pass s;
  s.round_trip = core_round_trip_seconds();
  s.cache_probe = cache_probe(machine);
  time_layers(machine, s.gemms);
  s.cache = cache_sweep(machine, {16, 64});
  s.small_rows_cache = cache_sweep(machine, {planner::kSmallRows});
  s.vector = vector_rate(machine);
  s.accumulate = accumulate_seconds(machine);
  s.streaming = streaming(machine);
  s.copy_cache = copy_sweep(machine);
  s.cold_vector = cold_vector_rate(machine);
  s.host = host(machine);
  s.collectives = collectives(machine);
  s.op_overhead = op_overhead(machine);
  // Between a step's segments the pool's threads have slept; between a lone replica's
  // spread GEMMs they still spin.
  s.barrier = pool_run(machine, 200e-6, 100);
  s.pool_run = pool_run(machine, 0.0, 1000);
  // Priced from this pass's own GEMMs and pool run: measured minutes apart, the two
  // sides of the ratio could be on differently placed CPUs.
  if (machine.threads > 1) s.spread = spread_efficiency(machine, s.gemms, s.pool_run);
  return s;
}

std::string si(double v, const char* unit) {
  if (v >= 1e9) return fmt::format("{:.2f} G{}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.2f} M{}", v / 1e6, unit);
  return fmt::format("{:.3g} {}", v, unit);
}

}  // namespace

double cache_probe_seconds(int n_threads) {
  Machine machine(std::max(1, n_threads), kProbeBatchSeconds);
  return cache_probe(machine);
}

bool MachineCalibration::moved() const {
  const auto [lo, hi] = std::minmax_element(round_trips.begin(), round_trips.end());
  return lo != round_trips.end() && config::placement_differs(*lo, *hi);
}

MachineCalibration calibrate_machine(const CalibrateOptions& options) {
  const auto t0 = Clock::now();
  MachineCalibration c;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = options.n_threads > 0 ? options.n_threads : cores;
  c.cpu = reports::current_environment(threads).cpu_model;
  c.kernels = engine::kernels_in_use();
  config::DeviceProfile& p = c.profile;
  p.name = options.name;
  p.description = fmt::format("{}, {} threads, measured by poprun calibrate", c.cpu, threads);
  p.tiles = 1;  // no IO tiles on a CPU: io_tiles take nothing from compute
  // The machine's memory, whole MiB: a CPU's replicas share it (device.memory_per_replica
  // sets a replica's share).
  const auto pages = static_cast<std::uint64_t>(std::max(0L, sysconf(_SC_PHYS_PAGES)));
  const auto page = static_cast<std::uint64_t>(std::max(0L, sysconf(_SC_PAGESIZE)));
  p.memory_bytes = std::max<std::uint64_t>(1, pages * page >> 20) << 20;
  p.host_threads = threads;
  Machine machine(threads, options.seconds_per_batch);

  std::vector<Pass> passes;
  if (options.passes < 1)
    throw Error("calibrate: {} passes, but a calibration needs at least one", options.passes);
  for (int i = 0; i < options.passes; ++i) passes.push_back(measure_pass(machine));
  // The median over the passes of a figure, given how to read it from one.
  const auto median = [&](auto&& figure) {
    return median_of(options.passes,
                     [&](int i) { return figure(passes[static_cast<std::size_t>(i)]); });
  };
  c.gemms = passes.front().gemms;
  for (std::size_t i = 0; i < c.gemms.size(); ++i)
    c.gemms[i].seconds = median([&](const Pass& s) { return s.gemms[i].seconds; });
  c.gemm_fit_rms = fit_gemms(c.gemms, p);
  // A sweep's median set by set.
  const auto sweep = [&](CacheSweep Pass::*member) {
    CacheSweep m = passes.front().*member;
    for (std::size_t i = 0; i < m.points.size(); ++i)
      m.points[i].seconds = median([&](const Pass& s) { return (s.*member).points[i].seconds; });
    return m;
  };
  c.cache = sweep(&Pass::cache);
  const ColdRamp gemm = fit_ramp(c.cache);
  p.cache_warm_bytes = gemm.warm_bytes;
  p.cache_cold_bytes = gemm.cold_bytes;
  p.cold_gemm_bytes_per_second = cold_operand_rate(c.cache, gemm);
  c.small_rows_cache = sweep(&Pass::small_rows_cache);
  const ColdRamp small = fit_ramp(c.small_rows_cache);
  p.small_rows_warm_bytes = small.warm_bytes;
  p.small_rows_cold_bytes = small.cold_bytes;
  p.small_rows_cold_bytes_per_second = cold_operand_rate(c.small_rows_cache, small);

  p.vector_flops_per_second = median([](const Pass& s) { return s.vector; });
  // Within noise of nothing (or below), the fold is priced as nothing, not as FLOPs.
  p.accumulate_seconds =
      std::max(kAccumulateFloor, median([](const Pass& s) { return s.accumulate; }));
  const auto link = [&](Link Pass::*member) {
    const double bandwidth = median([&](const Pass& s) { return (s.*member).bytes_per_second; });
    const double latency = median([&](const Pass& s) { return (s.*member).latency_seconds; });
    return config::LinkProfile{bandwidth, latency, 1.0, 1.0};
  };
  p.streaming = link(&Pass::streaming);
  c.copy_cache = sweep(&Pass::copy_cache);
  const ColdRamp copies = fit_ramp(c.copy_cache);
  p.copy_warm_bytes = copies.warm_bytes;
  p.copy_cold_bytes = copies.cold_bytes;
  p.cold_copy_bytes_per_second =
      copies.extra_seconds > 0.0 ? 2.0 * kCopyEntry / c.copy_cache.points.back().seconds : 0.0;
  p.cold_vector_flops_per_second = median([](const Pass& s) { return s.cold_vector; });
  p.host = link(&Pass::host);
  p.ipu_link = link(&Pass::collectives);
  p.op_overhead_seconds = median([](const Pass& s) { return s.op_overhead; });
  p.barrier_seconds = median([](const Pass& s) { return s.barrier; });
  p.pool_run_seconds = median([](const Pass& s) { return s.pool_run; });
  // With one thread nothing is spread: 0, priced as 1. Spread blocks measured faster than
  // beside other threads' GEMMs are within the noise: at most 1, as an efficiency is.
  if (threads > 1)
    p.gemm_spread_efficiency = std::min(1.0, median([](const Pass& s) { return s.spread; }));
  // Host and remote transfers are copies on the replica's own thread: nothing
  // synchronises beyond what the links' latencies measured.
  p.sync_overhead_seconds = 0.0;
  p.core_round_trip_seconds = median([](const Pass& s) { return s.round_trip; });
  for (const Pass& s : passes) c.round_trips.push_back(s.round_trip);
  p.cache_probe_seconds = median([](const Pass& s) { return s.cache_probe; });

  c.measured = {
      {"element-wise (Adam, GELU gradient)", p.vector_flops_per_second, "FLOP/s"},
      {"optimizer step, state from memory", p.cold_vector_flops_per_second, "FLOP/s"},
      {"accumulators' running mean, per weight", p.accumulate_seconds * 1e12, "ps"},
      {"one replica's GEMMs spread, of the price", p.gemm_spread_efficiency * 100, "%"},
      {"streaming copy (RemoteStore, 1 MiB)", p.streaming.bytes_per_second, "B/s"},
      {"host stream (pixel normalisation)", p.host.bytes_per_second, "B/s"},
      {"collective bandwidth (all-reduce, 1 MiB)", p.ipu_link.bytes_per_second, "B/s"},
      {"collective latency (per exchange)", p.ipu_link.latency_seconds * 1e6, "µs"},
      {"compute op overhead", p.op_overhead_seconds * 1e6, "µs"},
      {"thread pool barrier (threads asleep)", p.barrier_seconds * 1e6, "µs"},
      {"thread pool run (threads spinning)", p.pool_run_seconds * 1e6, "µs"},
      {"core round trip (where the CPUs are)", p.core_round_trip_seconds * 1e9, "ns"},
      {"cache probe (8.3 MiB a thread)", p.cache_probe_seconds * 1e6, "µs"},
  };
  c.seconds = since(t0);
  return c;
}

std::string calibrated_profile_yaml(const MachineCalibration& c) {
  return config::profile_to_yaml(
      c.profile,
      {fmt::format("A CPU profile measured by `poprun calibrate` on {}, kernels {}.", c.cpu,
                   c.kernels),
       "The GEMM rate and curve are fitted to the linear kernels at the MNIST plans' shapes;",
       "the other figures are the engine's own copies, collectives and element-wise kernels",
       "(runner/calibrate.h). Estimates from it compare with poprun's measurements on this",
       "machine; on another, calibrate again."});
}

void print_machine_calibration(std::ostream& out, const MachineCalibration& c) {
  fmt::print(out, "CPU: {}\nkernels: {}\nthreads: {}\n\n", c.cpu, c.kernels,
             c.profile.host_threads);
  fmt::print(out, "GEMMs (the linear kernels, every thread its own at once)\n");
  fmt::print(out, "{:<12} {:>5} {:>5} {:>5} {:>15} {:>15}\n", "kernel", "m", "n", "k", "measured",
             "fitted");
  for (const auto& g : c.gemms)
    fmt::print(out, "{:<12} {:>5} {:>5} {:>5} {:>15} {:>15}\n", g.kernel, g.m, g.n, g.k,
               si(g.flops_per_second(), "FLOP/s"), si(g.fitted_flops_per_second, "FLOP/s"));
  fmt::print(out,
             "fit: peak {}, half_m {:.1f}, half_n {:.1f}, half_k {:.1f}; rms log error {:.3f}; "
             "up to {} rows {}\n\n",
             si(c.profile.flops_per_second * c.profile.gemm_max_efficiency, "FLOP/s"),
             c.profile.gemm_half_m, c.profile.gemm_half_n, c.profile.gemm_half_k, c.gemm_fit_rms,
             c.profile.gemm_small_rows,
             si(c.profile.flops_per_second * c.profile.gemm_small_rows_efficiency, "FLOP/s"));
  const auto print_sweep = [&](const CacheSweep& sweep, double warm, double cold, double rate) {
    const std::string what =
        sweep.rows.empty()
            ? fmt::format("the remote store's copies, entries of {} KiB", kCopyEntry >> 10)
            : fmt::format("a {}x{} layer's kernels, micro-batches {}", kSweepWidth, kSweepWidth,
                          fmt::join(sweep.rows, " and "));
    fmt::print(out,
               "caches ({}, every thread cycling through its working set)\n{:>12} {:>15} "
               "{:>14}\n",
               what, "working set", "time", "cold fraction");
    for (const auto& q : sweep.points)
      fmt::print(out, "{:>8.1f} MiB {:>12.1f} µs {:>14.2f}\n", q.working_set_bytes / (1 << 20),
                 q.seconds * 1e6, q.cold_fraction);
    fmt::print(out, "fit: warm up to {:.1f} MiB, cold from {:.1f} MiB, cold {} {}\n\n",
               warm / (1 << 20), cold / (1 << 20), sweep.rows.empty() ? "copies" : "operands",
               si(rate, "B/s"));
  };
  const config::DeviceProfile& p = c.profile;
  print_sweep(c.cache, p.cache_warm_bytes, p.cache_cold_bytes, p.cold_gemm_bytes_per_second);
  print_sweep(c.small_rows_cache, p.small_rows_warm_bytes, p.small_rows_cold_bytes,
              p.small_rows_cold_bytes_per_second);
  print_sweep(c.copy_cache, p.copy_warm_bytes, p.copy_cold_bytes, p.cold_copy_bytes_per_second);
  for (const auto& m : c.measured)
    fmt::print(out, "{:<42} {}\n", m.what,
               m.unit == "µs" || m.unit == "ns" || m.unit == "ps" || m.unit == "%"
                   ? fmt::format("{:.2f} {}", m.value, m.unit)
                   : si(m.value, m.unit.c_str()));
  if (c.moved()) {
    std::vector<long> ns;
    for (const double t : c.round_trips) ns.push_back(std::lround(t * 1e9));
    fmt::print(out,
               "note: the machine moved its CPUs during the calibration (the passes' core round "
               "trips: {} ns); each figure is the median of its passes'\n",
               fmt::join(ns, " "));
  }
  fmt::print(out, "calibration took {:.1f} s\n", c.seconds);
}

int run_calibrate_command(const CalibrateCommand& command, std::ostream& out, std::ostream& err) {
  // A path that cannot be written is refused before the measurements, not after (the
  // same check as every tool's -o, base/output_file.h).
  if (command.output.empty()) {
    err << "poprun calibrate: error: --output is required: give the profile file to write, "
           "e.g. -o my-cpu.yaml\n";
    return 2;
  }
  if (const std::string why = output_path_problem(command.output); !why.empty()) {
    err << "poprun calibrate: error: --output: " << why << '\n';
    return 2;
  }
  const MachineCalibration c = calibrate_machine(command.options);
  const std::string yaml = calibrated_profile_yaml(c);
  // What is written must load as a profile (config/yaml/profile.h): checked, not assumed.
  const config::ProfileLoad back =
      config::load_profile_string(yaml, command.output, c.profile.name);
  if (!back.ok()) throw Error("poprun calibrate wrote a profile that does not load (a bug)");
  AtomicFile file(command.output, TemporaryName::kSuffix);
  file.write(yaml.data(), yaml.size());
  file.commit();
  print_machine_calibration(out, c);
  out << fmt::format(
      "wrote {} (device profile {}); plan with it: --set device.profile={}\n", command.output,
      c.profile.name,
      config::is_profile_path(command.output) ? command.output : "./" + command.output);
  return 0;
}

}  // namespace popkit::runner
