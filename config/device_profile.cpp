// The table of a profile file's numeric parameters.
#include "config/device_profile.h"

#include <algorithm>
#include <array>

namespace popkit::config {
namespace {

using P = DeviceProfile;
using L = LinkProfile;

constexpr ProfileParameter value(std::string_view key, double P::*m, bool required, bool positive,
                                 std::string_view what) {
  return {key, m, nullptr, nullptr, required, positive, what};
}
constexpr ProfileParameter link(std::string_view key, LinkProfile P::*l, double L::*m,
                                bool required, bool positive, std::string_view what) {
  return {key, nullptr, l, m, required, positive, what};
}

constexpr std::array kParameters = {
    value("compute.flops_per_second", &P::flops_per_second, true, true,
          "peak GEMM rate, float32, all tiles"),
    value("compute.vector_flops_per_second", &P::vector_flops_per_second, true, true,
          "element-wise rate, all tiles"),
    value("compute.gemm.max_efficiency", &P::gemm_max_efficiency, false, true,
          "fraction of the peak a large GEMM reaches"),
    value("compute.gemm.half_m", &P::gemm_half_m, false, false,
          "rows (m) at which a GEMM reaches half its rate along m"),
    value("compute.gemm.half_n", &P::gemm_half_n, false, false,
          "columns (n) at which a GEMM reaches half its rate along n"),
    value("compute.gemm.half_k", &P::gemm_half_k, false, false,
          "reduction length (k) at which a GEMM reaches half its rate along k"),
    value("compute.gemm.small_rows", &P::gemm_small_rows, false, false,
          "a CPU: micro-batches of at most this many rows take the small-batch kernels"),
    value("compute.gemm.small_rows_efficiency", &P::gemm_small_rows_efficiency, false, false,
          "a CPU: the small-batch kernels' fraction of the peak"),
    value("compute.gemm.spread_efficiency", &P::gemm_spread_efficiency, false, false,
          "a CPU: one replica's GEMM spread over the threads, its rate against each thread's own"),
    value("compute.host_threads", &P::host_threads, false, false,
          "a CPU: the threads replicas run on (0: a device per replica)"),
    value("compute.accumulate_seconds", &P::accumulate_seconds, false, false,
          "a CPU: per weight, folding a gradient into its accumulator's running mean"),
    value("caches.warm_bytes", &P::cache_warm_bytes, false, false,
          "a CPU: a thread's working set up to which its data stays in the caches"),
    value("caches.cold_bytes", &P::cache_cold_bytes, false, false,
          "a CPU: a thread's working set from which it all comes from memory"),
    value("caches.gemm_bytes_per_second", &P::cold_gemm_bytes_per_second, false, false,
          "a CPU: what a cold GEMM's weight-sized operand adds, bytes per second"),
    value("caches.small_rows_warm_bytes", &P::small_rows_warm_bytes, false, false,
          "a CPU: warm_bytes for the small-batch kernels"),
    value("caches.small_rows_cold_bytes", &P::small_rows_cold_bytes, false, false,
          "a CPU: cold_bytes for the small-batch kernels"),
    value("caches.small_rows_gemm_bytes_per_second", &P::small_rows_cold_bytes_per_second, false,
          false, "a CPU: gemm_bytes_per_second for the small-batch kernels"),
    value("caches.copy_warm_bytes", &P::copy_warm_bytes, false, false,
          "a CPU: warm_bytes for the remote store's copies"),
    value("caches.copy_cold_bytes", &P::copy_cold_bytes, false, false,
          "a CPU: cold_bytes for the remote store's copies"),
    value("caches.copy_bytes_per_second", &P::cold_copy_bytes_per_second, false, false,
          "a CPU: a remote load or store of cold data, bytes per second"),
    value("caches.optimizer_flops_per_second", &P::cold_vector_flops_per_second, false, false,
          "a CPU: the optimizer's step on state that comes from memory, FLOPs per second"),
    value("caches.core_round_trip_seconds", &P::core_round_trip_seconds, false, false,
          "a CPU: a cache line's round trip between two of its cores when measured (not priced: "
          "runs are checked against it)"),
    value("caches.probe_seconds", &P::cache_probe_seconds, false, false,
          "a CPU: the cache probe's time when measured, 8 MiB of a layer's operands a thread (not "
          "priced: runs are checked against it)"),
    link("links.ipu_link.bytes_per_second", &P::ipu_link, &L::bytes_per_second, true, true,
         "collectives, per replica"),
    link("links.ipu_link.latency_seconds", &P::ipu_link, &L::latency_seconds, false, false,
         "per collective"),
    link("links.ipu_link.efficiency", &P::ipu_link, &L::efficiency, false, true,
         "achieved fraction of bytes_per_second"),
    link("links.ipu_link.shared_by", &P::ipu_link, &L::shared_by, false, true,
         "replicas that share the link at once"),
    link("links.streaming.bytes_per_second", &P::streaming, &L::bytes_per_second, true, true,
         "remote buffers in streaming memory"),
    link("links.streaming.latency_seconds", &P::streaming, &L::latency_seconds, false, false,
         "per remote load or store"),
    link("links.streaming.efficiency", &P::streaming, &L::efficiency, false, true,
         "achieved fraction of bytes_per_second"),
    link("links.streaming.shared_by", &P::streaming, &L::shared_by, false, true,
         "replicas that share the link at once"),
    link("links.host.bytes_per_second", &P::host, &L::bytes_per_second, true, true, "host streams"),
    link("links.host.latency_seconds", &P::host, &L::latency_seconds, false, false,
         "per host transfer"),
    link("links.host.efficiency", &P::host, &L::efficiency, false, true,
         "achieved fraction of bytes_per_second"),
    link("links.host.shared_by", &P::host, &L::shared_by, false, true,
         "replicas that share the link at once"),
    value("overheads.op_seconds", &P::op_overhead_seconds, false, false,
          "per compute op (compute set and its sync)"),
    value("overheads.sync_seconds", &P::sync_overhead_seconds, false, false,
          "per collective, remote or host transfer, beyond the link's latency"),
    value("overheads.barrier_seconds", &P::barrier_seconds, false, false,
          "a CPU: per run of the thread pool, its threads asleep (collective exchange)"),
    value("overheads.pool_run_seconds", &P::pool_run_seconds, false, false,
          "a CPU: per run of the thread pool, its threads spinning (spread GEMM)"),
};

}  // namespace

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
