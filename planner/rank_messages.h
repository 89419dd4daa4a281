// The collectives' messages between MPI ranks, counted for a rank's host-memory estimate
// (host_memory.h): over mpirun the direct collectives (engine/runtime/direct_collectives.cpp)
// move one piece per pair of replicas on different ranks and piece of the tensor (an
// all-gather's shard once per rank), and the transport (engine/runtime/mpi_world.cpp)
// carries a round's pieces between two ranks as one message, with a record and a datatype
// block for each piece; the terms of the sums and the gathered shards land in a receive
// area that keeps its largest size.
#pragma once

#include <cstdint>

#include "planner/plan.h"

namespace popkit::planner {

struct RankMessages {
  std::uint64_t pieces = 0;         // the most one collective moves on one rank
  std::uint64_t receive_bytes = 0;  // the largest receive area of one rank
};

// Over `ranks` ranks hosting R / ranks consecutive replicas each, the busiest rank's
// figures over every collective op of the plan (repeat bodies included); zero in one
// process. Rank k's pieces in an op, per group of G members of which h are hosted
// there, with c of the group's pieces non-empty and c_k of them owned there:
// (c - c_k) h to or from the owners elsewhere, and c_k (G - h) at the owners here; in an
// all-gather, whose shards cross to a rank once, c - c_k received and c_k (P - 1) sent,
// P the ranks with members of the group.
RankMessages rank_messages(const Plan& plan, std::int64_t ranks);

}  // namespace popkit::planner
