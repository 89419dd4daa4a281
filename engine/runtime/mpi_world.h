// The OpenMPI world (built with POPKIT_MPI): the ranks of `mpirun -np N`, and the
// collectives between replicas on different ranks, with point-to-point messages.
//
// Threads: MPI_THREAD_FUNNELED. A rank runs its replicas on the pool's threads and its
// IO on the IO thread, but only the thread that called start() calls MPI: it drives the
// engine, posts and waits for every message of a collective (transport.h), and makes
// every all_gather of the ranks; the pool's threads only sum and copy buffers whose
// messages have completed. start() refuses a library that provides less (an Error naming
// both levels), and a call from another thread is refused before it reaches MPI.
#pragma once

#include <memory>
#include <string>

namespace popkit::engine {
class World;
namespace mpi {

// MPI_Init_thread at MPI_THREAD_FUNNELED. Throws popkit::Error, MPI finalized again,
// when the library provides a lower level.
std::shared_ptr<World> start(int& argc, char**& argv);
bool started();
void finish();
std::string library_version();

}  // namespace mpi
}  // namespace popkit::engine
