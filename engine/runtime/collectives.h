// Collectives across replicas, behind one interface so a multi-process backend (MPI)
// can replace the in-process one without touching the executor. Every call receives
// the buffers of the replicas this process hosts (all of them in-process) and works
// within each group of a ReplicaGrouping. Reductions add contributions in replica
// order, always: ((x_m0 + x_m1) + x_m2) + ..., then divide by the group size for a
// mean, so results never depend on thread timing or backend.
//
// RTS layout (plan.h): a shard is flat, n = ceil(nelms / S) elements; rank k holds
// elements [k n, (k+1) n) of the flat tensor, zero past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "planner/plan.h"

namespace popkit::engine {

using planner::DType;
using planner::ReduceOp;
using planner::ReplicaGrouping;

// One replica's operand: `nelms` elements of `dtype` at `data`.
struct ReplicaBuffer {
  std::int64_t replica = 0;
  std::byte* data = nullptr;
  std::int64_t nelms = 0;
  DType dtype = DType::kFloat32;
};

struct CollectiveBytes {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
};

class Collectives {
 public:
  virtual ~Collectives() = default;

  // tensor = reduce over the members of its group (float32).
  virtual void all_reduce(const ReplicaGrouping& grouping, ReduceOp op,
                          std::span<const ReplicaBuffer> tensors) = 0;
  // dst = slice (rank in shard_grouping) of the reduction over the group in `grouping`.
  virtual void reduce_scatter(const ReplicaGrouping& grouping,
                              const ReplicaGrouping& shard_grouping, ReduceOp op,
                              std::span<const ReplicaBuffer> src,
                              std::span<const ReplicaBuffer> dst) = 0;
  // dst = the group's shards in rank order, truncated to dst.nelms (any dtype).
  virtual void all_gather(const ReplicaGrouping& grouping, std::span<const ReplicaBuffer> src,
                          std::span<const ReplicaBuffer> dst) = 0;
  // dst = slice (rank in grouping) of src, zero past the end; no communication.
  virtual void slice_shard(const ReplicaGrouping& grouping, std::span<const ReplicaBuffer> src,
                           std::span<const ReplicaBuffer> dst) = 0;

  // Bytes replica r has sent and received so far, each way as a ring moves them and the
  // planner counts them: all-reduce 2 (G-1) n / G, reduce-scatter (G-1) n / G of the
  // full tensor's n bytes, all-gather (G-1) shards; a group of one moves nothing.
  [[nodiscard]] virtual CollectiveBytes bytes(std::int64_t replica) const = 0;
};

class ThreadPool;

// `pool`, when given, runs the chunks of a collective in parallel; it must outlive the
// collectives and not be running a job when they are called.
std::unique_ptr<Collectives> make_in_process_collectives(std::int64_t replication_factor,
                                                         ThreadPool* pool = nullptr);

}  // namespace popkit::engine
