#include "runner/stop_signal.h"

namespace popkit::runner {
namespace {

volatile std::sig_atomic_t g_received = 0;

extern "C" void on_stop_signal(int signal) {
  g_received = signal;
}

}  // namespace

StopSignals::StopSignals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
  sigaction(SIGUSR1, &action, &old_usr1_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int StopSignals::received() {
  return g_received;
}

void StopSignals::clear() {
  g_received = 0;
}

}  // namespace popkit::runner
