// poprun train|eval --processes N: the same command as N MPI ranks under mpirun, with
// SIGINT and SIGTERM keeping their meaning (stop the step, checkpoint, exit 130).
// Sent to mpirun itself, either signal aborts the job: OpenMPI sends the ranks SIGTERM,
// kills them a second later and exits 1 whatever they return. It passes SIGUSR1 on
// instead, and then exits with the ranks' own code. So the launcher runs mpirun in a
// process group of its own (a terminal's Ctrl-C reaches the launcher alone), turns the
// first SIGINT/SIGTERM into SIGUSR1 for mpirun and a second into SIGTERM (abort), and
// exits with mpirun's code. A rank on its host that is sent SIGINT or SIGTERM alone
// passes it on (SIGUSR2), which stops the ranks as the launcher's first signal does.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace popkit::cli {

struct Launch {
  int processes = 0;     // 0 or 1: run here, in this process
  std::string hostfile;  // mpirun --hostfile; empty: every rank on this host
};

// Whether `launch` asks for ranks. Throws popkit::Error (exit 2) when it cannot be done:
// a build without MPI, a process that mpirun started already, a hostfile not readable.
[[nodiscard]] bool wants_ranks(const Launch& launch);

// The mpirun command line that runs this poprun command as `launch.processes` ranks:
// `arguments` (argv without argv[0]) with --processes and --hostfile taken out. The
// ranks get --oversubscribe when they outnumber this host's cores and no hostfile
// places them. `mpirun` is $POPKIT_MPIRUN, else the mpiexec CMake found. The ranks get
// the whole command line, as the user gave it, in $POPKIT_LAUNCH_ARGUMENTS, to record
// in the run's files (launch_arguments()).
[[nodiscard]] std::vector<std::string> mpirun_command(const Launch& launch,
                                                      const std::vector<std::string>& arguments);

// In a rank the launcher started: the launcher's arguments (argv without argv[0],
// --processes included); else `own`.
[[nodiscard]] std::vector<std::string> launch_arguments(const std::vector<std::string>& own);
// Whether this process is a rank that `poprun --processes N` started.
[[nodiscard]] bool started_by_launcher();
// In a rank that the launcher started on its own host, the launcher's pid: a SIGINT or
// SIGTERM sent to this rank alone is passed on to it (SIGUSR2), and it stops every rank
// as after a signal of its own. 0 elsewhere.
[[nodiscard]] pid_t launcher_here();

// Runs the command, its error stream passed on without OpenMPI's boxes that repeat a
// rank's error (cli/mpirun_output.h), and returns its exit code when it is poprun's (0,
// 1, 2, 130); else 1, saying why (a rank killed by a signal, mpirun failing on its own).
// `local_ranks`: how many ranks run on this host (0 when a hostfile places them): a stop
// is passed on once those have their handlers in; without any, 2 s after mpirun starts.
// `where` ("poprun train") opens the launcher's own errors.
int run_ranks(const std::vector<std::string>& command, int local_ranks, const std::string& where);

}  // namespace popkit::cli
