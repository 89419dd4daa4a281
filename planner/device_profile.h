// The device profile the cost model prices plans with: data read from a profile file
// (config/device_profile.h; config/yaml/profile.h reads it into Config::device.resolved).
// And the network profile, for replicas spread over several hosts.
#pragma once

#include <cstdint>

#include "config/device_profile.h"

namespace popkit::planner {

using config::DeviceProfile;
using config::LinkProfile;

// The network between hosts when the replicas span several (`mpirun --hostfile`). Ranks
// host contiguous blocks of replicas (DESIGN.md, "The engine"), and mpirun fills a host's
// slots with consecutive ranks, so host h holds replicas [h P, (h+1) P), P =
// replicas_per_host (the last host fewer when P does not divide R). Each host has one
// full-duplex link of `bytes_per_second` each way, shared by its replicas; every message
// that crosses it also pays `latency_seconds`. Not a config key: where a run is deployed
// does not change what it computes, so popplan takes it on the command line.
struct NetworkProfile {
  std::int64_t replicas_per_host = 1;
  double bytes_per_second = 0.0;
  double latency_seconds = 0.0;

  [[nodiscard]] std::int64_t host_of(std::int64_t replica) const {
    return replica / replicas_per_host;
  }
  [[nodiscard]] std::int64_t n_hosts(std::int64_t replication_factor) const {
    return (replication_factor + replicas_per_host - 1) / replicas_per_host;
  }
};

}  // namespace popkit::planner
