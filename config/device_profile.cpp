// The table of a profile file's parameters (device_profile.h ProfileParameter): each key's
// member, the kinds of profile it applies to, its unit, bounds and partners.
#include "config/device_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace popkit::config {
namespace {

using P = DeviceProfile;
using L = LinkProfile;
using enum ProfileKinds;

// Wide enough for any machine, narrow enough that no estimate is inf, nan or 0 samples/s:
// the slowest rate at the least efficiency on the fewest compute tiles still prices a
// step in finite seconds, and the fastest with no overheads in more than 0.
constexpr ProfileBounds kRate{1e3, 1e21};    // FLOP/s, B/s
constexpr ProfileBounds kSeconds{0.0, 1.0};  // an overhead or latency: a second is no device's
constexpr ProfileBounds kFraction{1e-6, 1.0};
constexpr ProfileBounds kCurveRows{0.0, 1e9};
constexpr ProfileBounds kRows{1.0, 1e9, true};
constexpr ProfileBounds kCount{1.0, 1e6, true};  // tiles, threads, replicas
constexpr ProfileBounds kBytes{1.0, 1e18};

constexpr std::string_view kNoCacheTerm = "no such term";

constexpr ProfileParameter kParameters[] = {
    {.key = "tiles",
     .count = &P::tiles,
     .unit = "tiles",
     .bounds = kCount,
     .required = true,
     .what = "tiles per device (execution.io_tiles are taken from them)"},
    {.key = "memory",
     .size = &P::memory_bytes,
     .unit = "B",
     .bounds = kBytes,
     .required = true,
     .what = "on-chip memory per replica, e.g. 900MiB (device.memory_per_replica overrides it)"},
    {.key = "compute.flops_per_second",
     .member = &P::flops_per_second,
     .unit = "FLOP/s",
     .bounds = kRate,
     .required = true,
     .what = "peak GEMM rate, float32, all tiles"},
    {.key = "compute.vector_flops_per_second",
     .member = &P::vector_flops_per_second,
     .unit = "FLOP/s",
     .bounds = kRate,
     .required = true,
     .what = "element-wise rate, all tiles"},
    {.key = "compute.gemm.max_efficiency",
     .member = &P::gemm_max_efficiency,
     .bounds = kFraction,
     .what = "fraction of the peak a large GEMM reaches"},
    {.key = "compute.gemm.half_m",
     .member = &P::gemm_half_m,
     .unit = "rows",
     .bounds = kCurveRows,
     .what = "rows (m) at which a GEMM reaches half its rate along m"},
    {.key = "compute.gemm.half_n",
     .member = &P::gemm_half_n,
     .unit = "columns",
     .bounds = kCurveRows,
     .what = "columns (n) at which a GEMM reaches half its rate along n"},
    {.key = "compute.gemm.half_k",
     .member = &P::gemm_half_k,
     .unit = "elements",
     .bounds = kCurveRows,
     .what = "reduction length (k) at which a GEMM reaches half its rate along k"},
    {.key = "compute.gemm.small_rows",
     .member = &P::gemm_small_rows,
     .kinds = kCpu,
     .unit = "rows",
     .bounds = kRows,
     .unset = "the curve for every GEMM",
     .partners = {"compute.gemm.small_rows_efficiency"},
     .what = "micro-batches of at most this many rows take the engine's small-batch kernels"},
    {.key = "compute.gemm.small_rows_efficiency",
     .member = &P::gemm_small_rows_efficiency,
     .kinds = kCpu,
     .bounds = kFraction,
     .unset = "the curve for every GEMM",
     .partners = {"compute.gemm.small_rows"},
     .what = "the small-batch kernels' fraction of the peak"},
    {.key = "compute.gemm.spread_efficiency",
     .member = &P::gemm_spread_efficiency,
     .kinds = kCpu,
     .bounds = kFraction,
     .unset = "1",
     .what = "one replica's GEMM spread over the threads, its rate against each thread's own"},
    {.key = "compute.host_threads",
     .member = &P::host_threads,
     .kinds = kCpu,
     .unit = "threads",
     .bounds = kCount,
     .unset = "a device per replica, not a CPU",
     .what = "the threads replicas run on; makes the profile a CPU's"},
    {.key = "compute.accumulate_seconds",
     .member = &P::accumulate_seconds,
     .kinds = kCpu,
     .unit = "s",
     .bounds = kSeconds,
     .unset = "3 FLOPs a weight at vector_flops_per_second",
     .what = "per weight, folding a gradient into its accumulator's running mean"},
    {.key = "caches.warm_bytes",
     .member = &P::cache_warm_bytes,
     .kinds = kCpu,
     .unit = "B",
     .bounds = kBytes,
     .unset = kNoCacheTerm,
     .partners = {"caches.cold_bytes", "caches.gemm_bytes_per_second"},
     .what = "a thread's working set up to which its data stays in the caches"},
    {.key = "caches.cold_bytes",
     .member = &P::cache_cold_bytes,
     .kinds = kCpu,
     .unit = "B",
     .bounds = kBytes,
     .unset = kNoCacheTerm,
     .partners = {"caches.warm_bytes", "caches.gemm_bytes_per_second"},
     .at_least = "caches.warm_bytes",
     .what = "a thread's working set from which it all comes from memory"},
    {.key = "caches.gemm_bytes_per_second",
     .member = &P::cold_gemm_bytes_per_second,
     .kinds = kCpu,
     .unit = "B/s",
     .bounds = kRate,
     .unset = kNoCacheTerm,
     .partners = {"caches.warm_bytes", "caches.cold_bytes"},
     .what = "what a cold GEMM's weight-sized operand adds, bytes per second"},
    {.key = "caches.small_rows_warm_bytes",
     .member = &P::small_rows_warm_bytes,
     .kinds = kCpu,
     .unit = "B",
     .bounds = kBytes,
     .unset = kNoCacheTerm,
     .partners = {"caches.small_rows_cold_bytes", "caches.small_rows_gemm_bytes_per_second"},
     .what = "warm_bytes for the small-batch kernels"},
    {.key = "caches.small_rows_cold_bytes",
     .member = &P::small_rows_cold_bytes,
     .kinds = kCpu,
     .unit = "B",
     .bounds = kBytes,
     .unset = kNoCacheTerm,
     .partners = {"caches.small_rows_warm_bytes", "caches.small_rows_gemm_bytes_per_second"},
     .at_least = "caches.small_rows_warm_bytes",
     .what = "cold_bytes for the small-batch kernels"},
    {.key = "caches.small_rows_gemm_bytes_per_second",
     .member = &P::small_rows_cold_bytes_per_second,
     .kinds = kCpu,
     .unit = "B/s",
     .bounds = kRate,
     .unset = kNoCacheTerm,
     .partners = {"caches.small_rows_warm_bytes", "caches.small_rows_cold_bytes"},
     .what = "gemm_bytes_per_second for the small-batch kernels"},
    {.key = "caches.copy_warm_bytes",
     .member = &P::copy_warm_bytes,
     .kinds = kCpu,
     .unit = "B",
     .bounds = kBytes,
     .unset = kNoCacheTerm,
     .partners = {"caches.copy_cold_bytes", "caches.copy_bytes_per_second"},
     .what = "warm_bytes for the remote store's copies"},
    {.key = "caches.copy_cold_bytes",
     .member = &P::copy_cold_bytes,
     .kinds = kCpu,
     .unit = "B",
     .bounds = kBytes,
     .unset = kNoCacheTerm,
     .partners = {"caches.copy_warm_bytes", "caches.copy_bytes_per_second"},
     .at_least = "caches.copy_warm_bytes",
     .what = "cold_bytes for the remote store's copies"},
    {.key = "caches.copy_bytes_per_second",
     .member = &P::cold_copy_bytes_per_second,
     .kinds = kCpu,
     .unit = "B/s",
     .bounds = kRate,
     .unset = kNoCacheTerm,
     .partners = {"caches.copy_warm_bytes", "caches.copy_cold_bytes"},
     .what = "a remote load or store of cold data, bytes per second"},
    {.key = "caches.optimizer_flops_per_second",
     .member = &P::cold_vector_flops_per_second,
     .kinds = kCpu,
     .unit = "FLOP/s",
     .bounds = kRate,
     .unset = kNoCacheTerm,
     .what = "the optimizer's step on state that comes from memory (on the copies' ramp)"},
    {.key = "caches.core_round_trip_seconds",
     .member = &P::core_round_trip_seconds,
     .kinds = kCpu,
     .unit = "s",
     .bounds = kSeconds,
     .unset = "not measured",
     .what = "a cache line's round trip between two of its cores when measured (not priced: "
             "runs are checked against it)"},
    {.key = "caches.probe_seconds",
     .member = &P::cache_probe_seconds,
     .kinds = kCpu,
     .unit = "s",
     .bounds = kSeconds,
     .unset = "not measured",
     .what = "the cache probe's time when measured, 8 MiB of a layer's operands a thread (not "
             "priced: runs are checked against it)"},
    {.key = "links.ipu_link.bytes_per_second",
     .link = &P::ipu_link,
     .link_member = &L::bytes_per_second,
     .unit = "B/s",
     .bounds = kRate,
     .required = true,
     .what = "collectives, per replica"},
    {.key = "links.ipu_link.latency_seconds",
     .link = &P::ipu_link,
     .link_member = &L::latency_seconds,
     .unit = "s",
     .bounds = kSeconds,
     .what = "per collective"},
    {.key = "links.ipu_link.efficiency",
     .link = &P::ipu_link,
     .link_member = &L::efficiency,
     .bounds = kFraction,
     .what = "achieved fraction of bytes_per_second"},
    {.key = "links.ipu_link.shared_by",
     .link = &P::ipu_link,
     .link_member = &L::shared_by,
     .unit = "replicas",
     .bounds = kCount,
     .what = "replicas that share the link at once"},
    {.key = "links.streaming.bytes_per_second",
     .link = &P::streaming,
     .link_member = &L::bytes_per_second,
     .unit = "B/s",
     .bounds = kRate,
     .required = true,
     .what = "remote buffers in streaming memory"},
    {.key = "links.streaming.latency_seconds",
     .link = &P::streaming,
     .link_member = &L::latency_seconds,
     .unit = "s",
     .bounds = kSeconds,
     .what = "per remote load or store"},
    {.key = "links.streaming.efficiency",
     .link = &P::streaming,
     .link_member = &L::efficiency,
     .bounds = kFraction,
     .what = "achieved fraction of bytes_per_second"},
    {.key = "links.streaming.shared_by",
     .link = &P::streaming,
     .link_member = &L::shared_by,
     .unit = "replicas",
     .bounds = kCount,
     .what = "replicas that share the link at once"},
    {.key = "links.host.bytes_per_second",
     .link = &P::host,
     .link_member = &L::bytes_per_second,
     .unit = "B/s",
     .bounds = kRate,
     .required = true,
     .what = "host streams"},
    {.key = "links.host.latency_seconds",
     .link = &P::host,
     .link_member = &L::latency_seconds,
     .unit = "s",
     .bounds = kSeconds,
     .what = "per host transfer"},
    {.key = "links.host.efficiency",
     .link = &P::host,
     .link_member = &L::efficiency,
     .bounds = kFraction,
     .what = "achieved fraction of bytes_per_second"},
    {.key = "links.host.shared_by",
     .link = &P::host,
     .link_member = &L::shared_by,
     .unit = "replicas",
     .bounds = kCount,
     .what = "replicas that share the link at once"},
    {.key = "overheads.op_seconds",
     .member = &P::op_overhead_seconds,
     .unit = "s",
     .bounds = kSeconds,
     .what = "per compute op (compute set and its sync)"},
    {.key = "overheads.sync_seconds",
     .member = &P::sync_overhead_seconds,
     .unit = "s",
     .bounds = kSeconds,
     .what = "per collective, remote or host transfer, beyond the link's latency"},
    {.key = "overheads.program_seconds",
     .member = &P::program_seconds,
     .unit = "s",
     .bounds = kSeconds,
     .what = "per run of the device program (a training step, an evaluation batch): the "
             "host's launch and synchronisation"},
    {.key = "overheads.barrier_seconds",
     .member = &P::barrier_seconds,
     .kinds = kCpu,
     .unit = "s",
     .bounds = kSeconds,
     .what = "per run of the thread pool, its threads asleep (each collective exchange, each "
             "segment of R > 1 replicas, each chunk under full)"},
    {.key = "overheads.pool_run_seconds",
     .member = &P::pool_run_seconds,
     .kinds = kCpu,
     .unit = "s",
     .bounds = kSeconds,
     .unset = "barrier_seconds",
     .what = "per run of the thread pool, its threads spinning (each GEMM one replica spreads)"},
};
// 1000 -> "1000", 1e21 -> "1e21", 1e-06 -> "1e-6": the bounds as a reader writes them.
std::string bound(double x) {
  if (x == std::floor(x) && std::abs(x) < 1e5) return fmt::format("{:.0f}", x);
  std::string s = fmt::format("{:g}", x);
  const std::size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string exponent = s.substr(e + 1);
  const bool negative = exponent.front() == '-';
  exponent.erase(0, exponent.find_first_not_of("+-0"));
  return s.substr(0, e + 1) + (negative ? "-" : "") + exponent;
}

}  // namespace

double ProfileParameter::of(const DeviceProfile& p) const {
  if (count != nullptr) return static_cast<double>(p.*count);
  if (size != nullptr) return static_cast<double>(p.*size);
  return link != nullptr ? p.*link.*link_member : p.*member;
}

void ProfileParameter::set(DeviceProfile& p, double value) const {
  POPKIT_ASSERT(is_number());
  (link != nullptr ? p.*link.*link_member : p.*member) = value;
}

bool ProfileParameter::allows(double value) const {
  if (value == 0.0 && !unset.empty()) return true;
  return value >= bounds.min && value <= bounds.max &&
         (!bounds.whole || value == std::floor(value));
}

std::string ProfileParameter::range() const {
  return fmt::format("{}{}from {} to {}{}", bounds.min > 0 && !unset.empty() ? "0 or " : "",
                     bounds.whole ? "a whole number " : "", bound(bounds.min), bound(bounds.max),
                     unit.empty() ? "" : fmt::format(" {}", unit));
}

bool placement_differs(double a_seconds, double b_seconds) {
  if (a_seconds <= 0.0 || b_seconds <= 0.0) return false;
  return std::max(a_seconds, b_seconds) >= kPlacementRatio * std::min(a_seconds, b_seconds);
}

bool caches_differ(double a_seconds, double b_seconds) {
  if (a_seconds <= 0.0 || b_seconds <= 0.0) return false;
  return std::max(a_seconds, b_seconds) >= kCacheProbeRatio * std::min(a_seconds, b_seconds);
}

std::span<const ProfileParameter> profile_parameters() {
  return kParameters;
}

const ProfileParameter* find_profile_parameter(std::string_view key) {
  for (const auto& p : kParameters)
    if (p.key == key) return &p;
  return nullptr;
}

}  // namespace popkit::config
