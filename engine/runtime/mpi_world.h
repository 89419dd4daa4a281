// The OpenMPI world (built with POPKIT_MPI): the ranks of `mpirun -np N`, and the
// collectives between replicas on different ranks, with point-to-point messages.
#pragma once

#include <memory>
#include <string>

namespace popkit::engine {
class World;
namespace mpi {

// MPI_Init_thread (funneled: only the thread that drives the engine calls MPI).
std::shared_ptr<World> start(int& argc, char**& argv);
bool started();
void finish();
std::string library_version();

}  // namespace mpi
}  // namespace popkit::engine
