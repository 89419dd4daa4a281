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
#include "planner/plan.h"

namespace popkit::planner {

struct SyncGroups {
  std::vector<std::vector<std::int64_t>> gs1;  // every device, one group
  // full: one group of every device, so any IO syncs them all; single_pipeline: each
  // device alone, so it does its host IO without waiting; replica_and_ladder: the even
  // and the odd devices, two ladder sets that do not wait for each other at IO, so one
  // can stream while the other computes.
  std::vector<std::vector<std::int64_t>> gs2;
};

[[nodiscard]] SyncGroups sync_groups(config::SyncPattern pattern, std::int64_t replicas,
                                     std::int64_t stages);

// A pipelined plan's cycles and where its devices meet (issue 16 item 5). The cycles are
// the 1F1B schedule's clock with every slot one cycle long (planner/pipeline.h,
// time_slots on the plan's own slot orders): in cycle t each stage works on at most one
// micro-batch, as in PopART's pipeline cycles. A GS2 group of more than one device meets
// at the start of each cycle in which one of its devices starts a slot holding a
// transfer that syncs it: under full (every device in both groups) any transfer, host IO
// or a send or receive between stages; under replica_and_ladder host IO, the sends and
// receives pairing only the two stages they connect. A device waits at a cycle only
// after the work of its earlier cycles, and a wait is always for work of the same cycle
// or an earlier one (a receive for a send of an earlier cycle, a send for the receive of
// the previous micro-batch, which 1F1B starts no later), so the meetings cannot
// deadlock. Device d is replica d / stages, stage d % stages.
struct PipelineCycles {
  SyncGroups groups;
  std::vector<std::vector<std::int64_t>> slot_cycle;  // [phase][slot]: the cycle it starts in
  std::int64_t cycles = 0;                            // the step's, up to the flush
  // The GS2 groups of more than one device: their devices and the cycles they meet at.
  struct Meeting {
    std::vector<std::int64_t> devices;
    std::vector<std::int64_t> cycles;
  };
  std::vector<Meeting> meetings;
  std::vector<std::int64_t> group_of;  // [device]: its index in `meetings`, or -1
};

// Throws popkit::Error when the plan's slot orders cannot run.
[[nodiscard]] PipelineCycles pipeline_cycles(const Plan& plan);

// "{0, 1, 2, 3}", and past `most` members "{0, 1, ..., 511} (512 devices)".
[[nodiscard]] std::string device_set_text(const std::vector<std::int64_t>& devices,
                                          std::size_t most = 8);

}  // namespace popkit::planner
