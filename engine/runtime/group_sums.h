// The sums of the direct collectives (direct_collectives.cpp): a sum per owner of a
// reduce-scatter's shard or an all-reduce's chunk, run in pieces on the pool, each element
// summed in replica order by the one kernel (reduce_terms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/runtime/collectives.h"
#include "engine/runtime/world.h"

namespace popkit::engine {

// A reduction's buffer as floats; throws popkit::Error unless it is float32.
float* floats(const ReplicaBuffer& b);

// Buffers by replica: those of the replicas hosted here, null for the others.
using BuffersByReplica = std::vector<const ReplicaBuffer*>;

// A sum in replica order into `out` (hosted here) of every member's `n` elements from
// `offset` in its buffer (`terms`, by replica), zero for `padding` elements past it. The
// terms of members elsewhere arrive in the receive area from `slot`, `stride` floats
// apart in member order: the area holds a row per member elsewhere of its terms for
// every sum of the group here, so that one member's terms land in one block. all_reduce's
// sums are copied to the other members hosted here (`copy_out`) and sent to the first
// member on each other process (`firsts`).
struct Sum {
  std::int64_t owner = 0;
  float* out = nullptr;
  std::int64_t n = 0;
  std::int64_t padding = 0;
  const std::vector<std::int64_t>* members = nullptr;
  const BuffersByReplica* terms = nullptr;
  std::int64_t offset = 0;
  std::size_t slot = 0;
  std::size_t stride = 0;
  bool copy_out = false;
  const std::vector<std::int64_t>* firsts = nullptr;
};

// Runs `sums`: each term in replica order into `out`, then copied to the other members
// hosted here. Terms of replicas `hosted` does not hold are read from `area` (the receive
// area); `parallel(n, fn)` runs fn(0) ... fn(n - 1), on the pool or in turn. Padding is
// zeroed, not summed. Sums of at least kRunElements elements are cut into pieces of
// kSumPiece; a group's smaller sums that lie side by side in the terms (shards or chunks
// of a few elements: at R 65,536, 2,048 sums of one element over 65,536 terms) are one
// piece of up to kRunElements, summed into a thread's scratch (host memory, outside the
// memory account, like the receive area) and copied out, so that each term is read once,
// in one run, where a sum of one element read one float of every term and listed all R
// of them. Every element's sum is the same whichever way.
inline constexpr std::int64_t kSumPiece = 16384;   // 64 KiB of float: a piece per task
inline constexpr std::int64_t kRunElements = 256;  // 1 KiB of each term: 8 pieces for 2,048
void run_sums(
    const std::vector<Sum>& sums, ReduceOp op, const HostedReplicas& hosted, const float* area,
    const std::function<void(std::int64_t, const std::function<void(std::int64_t)>&)>& parallel);

}  // namespace popkit::engine
