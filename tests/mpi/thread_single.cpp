// An MPI library that gives no thread support, for failure_test.sh: preloaded into
// poprun, its MPI_Init_thread asks the real library (PMPI) for MPI_THREAD_SINGLE,
// whatever poprun asked for, so OpenMPI provides just that. poprun must refuse it.
#include <mpi.h>

extern "C" int MPI_Init_thread(int* argc, char*** argv, int /*required*/, int* provided) {
  return PMPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, provided);
}
