// Device profiles: what the cost model prices a plan with. The IPU figures are the
// public GC2 (Mk1) and GC200 (Mk2) numbers, float32 compute; `cpu` is a modest host so
// plans can be compared with what `poprun` measures. Estimates, not measurements.
// In config/ because validation checks device.profile against these names; the planner
// prices plans with the figures.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace popkit::config {

struct DeviceProfile {
  std::string name;
  std::int64_t tiles = 1;
  double flops_per_second = 0.0;            // float32, all tiles
  double link_bytes_per_second = 0.0;       // IPU-Link, per replica, for collectives
  double streaming_bytes_per_second = 0.0;  // remote buffers in streaming memory
  double host_bytes_per_second = 0.0;       // host streams (PCIe / gateway)
  double link_latency_seconds = 0.0;        // per collective
  double streaming_latency_seconds = 0.0;   // per remote load or store
  double host_latency_seconds = 0.0;        // per host transfer
  std::uint64_t memory_bytes = 0;           // on-chip memory per replica
};

[[nodiscard]] const std::vector<DeviceProfile>& device_profiles();

// Nullptr for an unknown name.
[[nodiscard]] const DeviceProfile* find_device_profile(std::string_view name);

}  // namespace popkit::config
