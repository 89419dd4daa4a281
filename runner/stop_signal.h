// SIGINT, SIGTERM and SIGUSR1 during training: the handler only raises a flag; the
// trainer finishes the step it is in, writes a checkpoint and stops. SIGUSR1 is the one
// mpirun passes on to the ranks and then exits with their code (SIGINT or SIGTERM to
// mpirun itself aborts the job); `poprun train --processes N` turns both into it. A second signal
// gets the default action (SA_RESETHAND), so a stuck run can still be killed; checkpoints are
// written atomically, so that loses nothing already saved.
#pragma once

#include <csignal>

namespace popkit::runner {

// Installs the handlers for its lifetime and restores the previous ones after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received (SIGINT, SIGTERM or SIGUSR1), or 0.
  [[nodiscard]] static int received();
  static void clear();

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_usr1_ {};
};

}  // namespace popkit::runner
