// Collectives across replicas, behind one interface so a multi-process backend (MPI)
// can replace the in-process one without touching the executor. Every call receives
// the buffers of the replicas this process hosts (all of them in-process) and works
// within each group of a ReplicaGrouping. Reductions add contributions in replica
// order, always: ((x_m0 + x_m1) + x_m2) + ..., then divide by the group size for a
// mean, so results never depend on thread timing or backend.
//
// RTS layout (plan.h): a shard is flat, n = ceil(nelms / S) elements; rank k holds
// elements [k n, (k+1) n) of the flat tensor, zero past the end.
//
// Every backend runs the same direct algorithms, so the bytes each replica sends and
// receives are the same whatever the backend (G members in a group):
//  all_reduce: the flat tensor is cut into G owner chunks (owner_chunk below); the member
//    of rank k receives chunk k from each of the G-1 others, sums in replica order, and
//    sends the result back to each of them.
//  reduce_scatter: the member holding shard k receives slice k (truncated to the tensor,
//    padding is zeroed, not sent) from each other member of its group in `grouping`.
//  all_gather: each member receives every other member's shard, truncated to its
//    destination (a padded tail is not sent); its own shard is a local copy.
//  slice_shard: local, nothing moves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "planner/plan.h"
#include "planner/sharding.h"

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

  // Bytes replica r has sent to and received from other replicas so far, counted from
  // the copies the algorithms above make; a copy within one replica counts nothing. When a
  // tensor does not split evenly, members of a group move different bytes; the planner's
  // cost model (planner/cost.h) gives the mean over a group's members.
  [[nodiscard]] virtual CollectiveBytes bytes(std::int64_t replica) const = 0;
  // The part of bytes(replica) that went to or came from a replica in another process
  // (the MPI backend's messages); nothing in-process. Only for replicas this process hosts.
  [[nodiscard]] virtual CollectiveBytes cross_process_bytes(std::int64_t /*replica*/) const {
    return {};
  }
};

// The all_reduce owner chunks and the shard extents are the planner's
// (planner/sharding.h), so the cost model counts exactly the messages sent here.
using planner::owner_chunk;
using planner::OwnerChunk;
using planner::shard_extent;

// What every backend does alike, so their results and byte counts agree:
// out[0, count) = ((x_0 + x_1) + x_2) ... over elements [i0, i0 + count) of every term, in
// replica order, divided by the number of terms for a mean. `out` may be a term + i0.
void reduce_terms(float* out, const std::vector<const float*>& terms, std::int64_t i0,
                  std::int64_t count, ReduceOp op);
// slice_shard for one replica: dst = slice `rank` of src, zero past its end.
void copy_shard(const ReplicaBuffer& src, const ReplicaBuffer& dst, std::int64_t rank);

class ThreadPool;

// `pool`, when given, runs the chunks of a collective in parallel; it must outlive the
// collectives and not be running a job when they are called.
std::unique_ptr<Collectives> make_in_process_collectives(std::int64_t replication_factor,
                                                         ThreadPool* pool = nullptr);

}  // namespace popkit::engine
