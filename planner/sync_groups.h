// The sync groups of execution.sync_pattern (Poplar's SyncPattern; issue 16 item 5): which
// of the run's devices wait for each other at a sync. Devices are numbered replica-major,
// device = replica * stages + stage, so the stages of one pipeline are neighbours.
//
//   SyncGroups g = sync_groups(SyncPattern::kReplicaAndLadder, 2, 2);
//   // g.gs1 == {{0, 1, 2, 3}}, g.gs2 == {{0, 2}, {1, 3}}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace popkit::planner {

struct SyncGroups {
  std::vector<std::vector<std::int64_t>> gs1;  // every device, one group
  // full: one group of every device, so any IO syncs them all; single_pipeline: each
  // device alone, so it does its host IO without waiting; replica_and_ladder: the even
  // and the odd devices, two ladder sets that take turns at IO while the other computes.
  std::vector<std::vector<std::int64_t>> gs2;
};

[[nodiscard]] SyncGroups sync_groups(config::SyncPattern pattern, std::int64_t replicas,
                                     std::int64_t stages);

// "{0, 1, 2, 3}", and past `most` members "{0, 1, ..., 511} (512 devices)".
[[nodiscard]] std::string device_set_text(const std::vector<std::int64_t>& devices,
                                          std::size_t most = 8);

}  // namespace popkit::planner
