# What the MPI test scripts share (sourced): the mpirun command line. As root OpenMPI
# refuses to start without the two variables; on a machine with fewer cores than ranks it
# needs --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Sanitized builds: OpenMPI's own allocations are reported as leaks at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
mpirun=(mpirun --oversubscribe)
