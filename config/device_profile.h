// Device profiles: the figures the cost model prices a plan with (planner/cost.h). A
// profile is data, a YAML file (share/profiles/*.yaml, installed under
// share/popkit/profiles; config/yaml/profile.h loads and finds them), never code: this
// header only says what a profile holds, and lists its parameters in one table so the
// loader, the calibration (`popplan calibrate`) and the docs name them the same way.
// In config/ because a Config carries the profile its device.profile names.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace popkit::config {

// One link: a transfer of n bytes takes latency + n / rate, rate = bytes_per_second *
// efficiency / min(replicas, shared_by). bytes_per_second is the published figure,
// efficiency the achieved fraction of it, shared_by how many replicas (devices) share
// the link and move data over it at once (an IPU-M2000's 4 IPUs share its gateway's
// streaming memory; replicas beyond that have links of their own).
struct LinkProfile {
  double bytes_per_second = 0.0;
  double latency_seconds = 0.0;
  double efficiency = 1.0;
  double shared_by = 1.0;
  [[nodiscard]] double rate(std::int64_t replicas) const {
    const double sharing = std::min(static_cast<double>(replicas), shared_by);
    return bytes_per_second * efficiency / std::max(1.0, sharing);
  }
  [[nodiscard]] double seconds(double bytes, std::int64_t replicas = 1) const {
    return bytes <= 0 ? 0.0 : latency_seconds + bytes / rate(replicas);
  }
};

struct DeviceProfile {
  std::string name;         // "ipu-mk2", or the file's stem
  std::string description;  // one line
  std::string source;       // the file it was read from ("" for one built in code)
  std::int64_t tiles = 1;
  std::uint64_t memory_bytes = 0;  // on-chip memory per replica

  // GEMMs: flops / (flops_per_second * (1 - io tiles / tiles) * gemm_efficiency(m, n, k)),
  // efficiency(m, n, k) = max_efficiency * m/(m + half_m) * n/(n + half_n) * k/(k + half_k)
  // (a GEMM [m, k] x [k, n] reaches half the rate along an axis at half_* rows).
  double flops_per_second = 0.0;  // peak, float32, all tiles
  double gemm_max_efficiency = 1.0;
  double gemm_half_m = 0.0;
  double gemm_half_n = 0.0;
  double gemm_half_k = 0.0;
  // A CPU: the engine takes small-batch kernels (streaming W unpacked) for a micro-batch
  // of at most gemm_small_rows rows, and they run at gemm_small_rows_efficiency of the
  // peak instead of the curve's (on the calibrated VM 8 rows ran faster than 16: no
  // curve that rises with the rows can say so). 0: the curve for every GEMM.
  double gemm_small_rows = 0.0;
  double gemm_small_rows_efficiency = 0.0;
  // A CPU: one replica's GEMM spread over the threads in column blocks (R = 1), its rate
  // against the same blocks on threads that each run a GEMM of their own: they share the
  // operands and wait for the last block. 0: 1.
  double gemm_spread_efficiency = 0.0;
  // Everything that is not a GEMM (activations, loss, accumulation, the optimizer):
  // element-wise work at this rate on all tiles.
  double vector_flops_per_second = 0.0;
  // A CPU running the popkit engine (poprun), not a device per replica: the threads its
  // replicas run on (poprun's default, the machine's cores). More replicas than threads
  // take turns, so a replica's compute, copies and collective bytes take ceil(R / threads)
  // times as long; a single replica spreads its large GEMMs' blocks and its element-wise
  // passes over them (planner/workspace.h, element_blocks.h), and io_overlapped overlaps
  // nothing unless a thread is left free for the engine's IO thread. 0: every replica has a
  // device of its own (an IPU). A profile with threads is a CPU's: its estimates compare
  // with poprun's measurements (popreport compare).
  double host_threads = 0.0;

  // A CPU: the caches. The GEMM rates and the streaming link are measured on data that
  // stays in the caches (calibration calls each kernel on the same operands); in a step a
  // thread cycles through its replicas' weights, gradients and activations, and the
  // remote store through its replicas' remote buffers, and once those outgrow the caches
  // each GEMM waits for its weight-sized operand (the weight, or the weight's gradient)
  // from memory, at cold_gemm_bytes_per_second beyond its warm time, and a remote copy
  // runs at cold_copy_bytes_per_second. The part that comes cold rises from 0 at a
  // thread's working set of *_warm_bytes to 1 at *_cold_bytes, linearly in log(working
  // set) (the *_cold_fraction functions); the GEMMs, the small-batch kernels (which
  // stream W unpacked) and the copies each have their own. 0: no such term.
  double cache_warm_bytes = 0.0;
  double cache_cold_bytes = 0.0;
  double cold_gemm_bytes_per_second = 0.0;
  double small_rows_warm_bytes = 0.0;
  double small_rows_cold_bytes = 0.0;
  double small_rows_cold_bytes_per_second = 0.0;
  double copy_warm_bytes = 0.0;
  double copy_cold_bytes = 0.0;
  double cold_copy_bytes_per_second = 0.0;
  // The optimizer's step (element-wise, each weight's state read and written once a step)
  // on the copies' ramp: the part that comes cold runs at cold_vector_flops_per_second.
  double cold_vector_flops_per_second = 0.0;
  // Where the machine had put its CPUs when the profile was measured (runner/placement.h):
  // a cache line's round trip between two of them. Not priced; a run whose round trip is
  // a placement away from it ran on another machine than the one measured (popreport
  // compare says so). 0: not measured.
  double core_round_trip_seconds = 0.0;
  // How much of the last-level cache the machine left its threads when the profile was
  // measured: the cache probe's seconds (runner/calibrate.h cache_probe_seconds, a layer's
  // small-batch kernels cycling through 8.3 MiB of operands a thread). Not priced; other
  // work on the host that shares the cache slows it, and the plans whose data lives in
  // that cache (standard mode's weights and gradients) with it: a run whose probe is
  // kCacheProbeRatio away ran on another machine than the one measured (popreport compare
  // says so). 0: not measured.
  double cache_probe_seconds = 0.0;

  LinkProfile ipu_link;   // collectives between replicas, per replica
  LinkProfile streaming;  // remote buffers in streaming memory
  LinkProfile host;       // host streams (PCIe / gateway)

  // What every op costs beyond its work: a compute op (a compute set and its
  // synchronisation), and an op that synchronises outside the tiles (collective, remote
  // or host transfer), paid on top of its link's latency.
  double op_overhead_seconds = 0.0;
  double sync_overhead_seconds = 0.0;
  // What one run of the device program costs beyond its ops, once a training step and
  // once an evaluation batch, however large the batch: the host's launch of the program
  // and its synchronisation with the device when the run ends (PopXL's session.run).
  double program_seconds = 0.0;
  // A CPU: what a run of work on the engine's thread pool costs beyond the work, its
  // threads woken from sleep and waited for. Paid per synchronised exchange of a
  // collective (each splits the step's segments) (planner/cost.h).
  double barrier_seconds = 0.0;
  // A CPU: a run of the pool while its threads still spin from the last one (they spin
  // 50 us before they sleep), as a lone replica's GEMMs run their column blocks one GEMM
  // after another. 0: barrier_seconds.
  double pool_run_seconds = 0.0;
  // A CPU: per weight of a gradient accumulator, what folding a micro-batch's gradient
  // into the running mean adds to the weight gradient (the kernels scale the accumulator
  // as they write it), at each micro-batch after the first. 0: the running mean is
  // priced as planner::kRunningMeanFlops a weight at vector_flops_per_second.
  double accumulate_seconds = 0.0;

  // The parameters calibration fits (keys of profile_parameters()), each with its prior:
  // the value the fit starts from and pulls towards, so fitting again from the fitted
  // file gives the same values. The other parameters are published figures or stated
  // assumptions.
  struct Fitted {
    std::string key;
    double prior = 0.0;
  };
  std::vector<Fitted> fitted;

  [[nodiscard]] bool is_cpu() const { return host_threads > 0; }
  [[nodiscard]] double gemm_cold_fraction(double working_set_bytes) const {
    return ramp(working_set_bytes, cache_warm_bytes, cache_cold_bytes);
  }
  [[nodiscard]] double small_rows_cold_fraction(double working_set_bytes) const {
    return ramp(working_set_bytes, small_rows_warm_bytes, small_rows_cold_bytes);
  }
  [[nodiscard]] double copy_cold_fraction(double working_set_bytes) const {
    return ramp(working_set_bytes, copy_warm_bytes, copy_cold_bytes);
  }
  [[nodiscard]] double gemm_efficiency(double m, double n, double k) const {
    return gemm_max_efficiency * (m / (m + gemm_half_m)) * (n / (n + gemm_half_n)) *
           (k / (k + gemm_half_k));
  }

 private:
  // 0 up to `warm`, 1 from `cold`, linear in log(bytes) between; 0 when `cold` is unset.
  static double ramp(double bytes, double warm, double cold) {
    if (cold <= 0.0 || bytes <= warm) return 0.0;
    if (bytes >= cold || cold <= warm) return 1.0;
    return std::log(bytes / warm) / std::log(cold / warm);
  }
};

// Whether two core round trips (DeviceProfile::core_round_trip_seconds, a run's) are a
// placement apart: one at least kPlacementRatio times the other. On the virtual machine
// measured, a cache line's round trip took 50-90 ns with the CPUs on one last-level cache
// and 320-370 ns across two. 0 (not measured) is apart from nothing.
inline constexpr double kPlacementRatio = 2.0;
[[nodiscard]] bool placement_differs(double a_seconds, double b_seconds);

// Whether two cache probes (DeviceProfile::cache_probe_seconds, a run's) are a cache's
// share apart: one at least kCacheProbeRatio times the other. On the virtual machine
// measured, a run's probes at its start and end took 126-145 us when standard R 2 x 8 x 4
// ran at 20-23k samples/s (but for one, 239), and in every run at 11-18k the slower of
// them took 200-363 us. 0 (not measured) is apart from nothing.
inline constexpr double kCacheProbeRatio = 1.3;
[[nodiscard]] bool caches_differ(double a_seconds, double b_seconds);

// Which profiles a parameter applies to: a device's, one per replica (an IPU's), a CPU's
// (compute.host_threads set, DeviceProfile::is_cpu), or both. A profile that sets (not 0)
// a parameter of the other kind is refused: its estimates would price what that kind
// never runs.
enum class ProfileKinds { kBoth, kIpu, kCpu };

// The values a parameter may take: from `min` to `max`, both included, a whole number
// when `whole`.
struct ProfileBounds {
  double min = 0.0;
  double max = 0.0;
  bool whole = false;
};

// A parameter of a profile file, one row of the table every check, the writer and the
// docs' key table read (config/device_profile.cpp): its key (a dotted path in the YAML
// file), the member it sets, the kinds of profile it applies to, its unit and bounds,
// whether it must be given (others keep the member's default), what 0 means where 0 is
// allowed outside the bounds ("" where it is not), the parameters it is set together
// with (each needs the others too: one alone prices nothing or divides by 0), the one it
// may not be below, and what it is.
struct ProfileParameter {
  std::string_view key{};
  double DeviceProfile::*member = nullptr;
  LinkProfile DeviceProfile::*link = nullptr;  // set: the member is in this link
  double LinkProfile::*link_member = nullptr;
  std::int64_t DeviceProfile::*count = nullptr;  // set: a whole count in the file (tiles)
  std::uint64_t DeviceProfile::*size = nullptr;  // set: a size with a unit (memory, 900MiB)
  ProfileKinds kinds = ProfileKinds::kBoth;
  std::string_view unit{};  // "FLOP/s", "B/s", "s", "B", "rows", ...; "" for a fraction
  ProfileBounds bounds{};
  bool required = false;
  std::string_view unset{};
  std::array<std::string_view, 2> partners{};
  std::string_view at_least{};
  std::string_view what{};

  // A number of the cost model (a double member; not tiles or memory).
  [[nodiscard]] bool is_number() const { return count == nullptr && size == nullptr; }
  // What calibration may fit: a number that need not be whole.
  [[nodiscard]] bool fittable() const { return is_number() && !bounds.whole; }
  [[nodiscard]] double of(const DeviceProfile& p) const;
  void set(DeviceProfile& p, double value) const;  // a number's (is_number)
  [[nodiscard]] bool applies_to(bool cpu) const {
    return kinds == ProfileKinds::kBoth || (kinds == ProfileKinds::kCpu) == cpu;
  }
  // Whether `value` is within the bounds, or 0 where `unset` says what 0 means.
  [[nodiscard]] bool allows(double value) const;
  // The values allowed, for messages and the docs: "0 or a whole number from 1 to 1e6
  // threads", "from 1e-6 to 1".
  [[nodiscard]] std::string range() const;
};

// Every parameter, in file order. `name`, `description` and `fitted` are the file's other
// keys.
[[nodiscard]] std::span<const ProfileParameter> profile_parameters();

// The parameter with that key, or nullptr.
[[nodiscard]] const ProfileParameter* find_profile_parameter(std::string_view key);

}  // namespace popkit::config
