// What carries the bytes of a collective between replicas of different processes. The
// direct algorithms of collectives.h are written once (direct_collectives.cpp) over a
// Transport: between two replicas of this process they copy, or read a replica's buffer
// in place; to or from a replica of another process they post a message here. In one
// process every replica is hosted and no message is ever posted; across the ranks of
// `mpirun` the messages are MPI's (mpi_world.cpp).
//
// Threads: a collective posts and waits for its messages on the thread that called it;
// the pool's threads only sum and copy between buffers whose messages have completed. So
// a Transport is used by one thread at a time, the caller of the collective (MPI: the
// thread that started MPI, MPI_THREAD_FUNNELED).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/runtime/collectives.h"
#include "engine/runtime/world.h"

namespace popkit::engine {

// The rounds of the algorithms: a message is told apart by its round and its two replicas.
// all_reduce sends each contribution to its chunk's owner, then the sum back from it;
// reduce_scatter sends to the owner only; all_gather sends shards.
enum class Round : int { kToOwner = 0, kFromOwner = 1, kGather = 2 };

class Transport {
 public:
  virtual ~Transport() = default;
  // The replicas of this process: a collective receives exactly their buffers.
  [[nodiscard]] virtual HostedReplicas hosted() const = 0;
  // The process hosting `replica`; two replicas of one process never exchange messages.
  [[nodiscard]] virtual int process_of(std::int64_t replica) const = 0;
  // Posts `bytes` of replica `from` (hosted here) to replica `to` (hosted elsewhere), at
  // `round` of the algorithm; the data must stay put until wait(). One message per
  // (round, from, to) and call: the receiver tells them apart by those three.
  virtual void send(const std::byte* data, std::size_t bytes, std::int64_t from, std::int64_t to,
                    Round round) = 0;
  // Posts the receipt of the message send() posts with the same (from, to, round) into
  // `data`, which must not be read or written until wait().
  virtual void receive(std::byte* data, std::size_t bytes, std::int64_t from, std::int64_t to,
                       Round round) = 0;
  // Starts what send() and receive() posted since the last flush(), which a transport may
  // hold back to carry together (MPI: one message per rank and round).
  virtual void flush() {}
  // Completes every message posted since the last wait(), flushing first.
  virtual void wait() = 0;
};

// The direct algorithms of collectives.h over `transport`. `pool`, when given, sums and
// copies the pieces of a collective in parallel; it must outlive the collectives and not
// be running a job when they are called.
std::unique_ptr<Collectives> make_direct_collectives(std::int64_t replication_factor,
                                                     std::unique_ptr<Transport> transport,
                                                     ThreadPool* pool);

}  // namespace popkit::engine
