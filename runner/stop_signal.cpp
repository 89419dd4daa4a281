#include "runner/stop_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <string>

namespace popkit::runner {
namespace {

// Read by the engine's threads during a step (engine.h stop_requested), so an atomic
// rather than a volatile sig_atomic_t; lock-free, so the handler may store it.
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free);
// The write end of the watching SetupWatch's pipe, or -1.
std::atomic<int> g_wake{-1};
// Set once, before any handler is installed: SIGUSR1 is the launcher's stop; a SIGINT or
// SIGTERM is passed on to the launcher when it runs here (g_launcher > 0).
bool g_launched = false;
pid_t g_launcher = 0;

// Wakes the SetupWatch or StopNotice watching, if one is (async-signal-safe).
void wake_watcher() {
  if (const int fd = g_wake.load(); fd >= 0) {
    const int saved = errno;
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
    errno = saved;
  }
}

// Opens `wake` and makes its write end the one that a stop signal wakes; false without a
// pipe, or while another watcher has it (one process, one signal).
bool watch_signals(int (&wake)[2]) {
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  int none = -1;
  return g_wake.compare_exchange_strong(none, wake[1]);
}

extern "C" void on_stop_signal(int signal) {
  g_received = signal;
  if (signal != SIGUSR1) {
    // A second SIGINT or SIGTERM, either of them, ends the process at once (the default).
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(SIGINT, &fallback, nullptr);
    sigaction(SIGTERM, &fallback, nullptr);
    if (g_launcher > 0) {
      const int saved = errno;
      ::kill(g_launcher, SIGUSR2);
      errno = saved;
    }
  }
  wake_watcher();
}

// SIGUSR1 blocked or unblocked (`how`) for this thread and the threads it starts.
void mask_usr1(int how) {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(how, &usr1, nullptr);
}

const char* signal_name(int signal) {
  return signal == SIGINT    ? "SIGINT"
         : signal == SIGTERM ? "SIGTERM"
         : g_launched        ? "the launcher"
                             : "SIGUSR1";
}

}  // namespace

StopSignals::StopSignals() {
  clear();
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
  // SIGUSR1 comes from mpirun, as often as `poprun --processes N` asks it to pass a stop
  // on (the launcher repeats it until the ranks have it): every one only raises the flag.
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
  // A rank blocks it from its start (block_until_handled()): one that came since is
  // delivered now, to the handler.
  mask_usr1(SIG_UNBLOCK);
}

void StopSignals::block_until_handled() {
  mask_usr1(SIG_BLOCK);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  // Not restored but ignored: the launcher repeats its stop until mpirun exits, and one
  // that comes while the rank ends must not kill it.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGUSR1, &ignore, nullptr);
}

int StopSignals::received() {
  return g_received;
}

const char* StopSignals::stopped_by() {
  return signal_name(g_received);
}

void StopSignals::launched_by_poprun(pid_t launcher) {
  g_launched = true;
  g_launcher = launcher;
}

void StopSignals::clear() {
  g_received = 0;
}

SetupWatch::SetupWatch(std::string tool, int exit_code)
    : tool_(std::move(tool)), exit_code_(exit_code) {
  // Unwatched, the signal waits for the first step as it did before set-ups were watched.
  if (!watch_signals(wake_)) return;
  thread_ = std::thread([this] { watch(); });
  // A signal that came before the pipe was there.
  if (g_received != 0) wake_watcher();
}

SetupWatch::~SetupWatch() {
  finish();
  for (const int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void SetupWatch::on_stop(std::function<void()> undo) {
  const std::lock_guard lock(mutex_);
  undo_ = std::move(undo);
}

void SetupWatch::finish() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard lock(mutex_);
    finished_ = true;
    g_wake.store(-1);
  }
  const char byte = 0;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
  thread_.join();
}

void SetupWatch::watch() {
  pollfd fd{wake_[0], POLLIN, 0};
  while (::poll(&fd, 1, -1) < 0 && errno == EINTR) {
  }
  const std::lock_guard lock(mutex_);
  if (finished_) return;
  const int signal = g_received;
  if (undo_) undo_();
  const std::string line = tool_ + ": stopped by " + signal_name(signal) +
                           " during set-up: no step taken, the folders it made removed\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  std::_Exit(exit_code_);
}

StopNotice::StopNotice(std::string tool, std::chrono::milliseconds delay)
    : tool_(std::move(tool)), delay_(delay) {
  // Unwatched, the stop goes unsaid, as before.
  if (!watch_signals(wake_)) return;
  thread_ = std::thread([this] { watch(); });
  if (g_received != 0) wake_watcher();
}

StopNotice::~StopNotice() {
  if (thread_.joinable()) {
    g_wake.store(-1);
    finished_ = true;
    const char byte = 0;
    [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
    thread_.join();
  }
  for (const int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void StopNotice::watch() {
  pollfd fd{wake_[0], POLLIN, 0};
  while (::poll(&fd, 1, -1) < 0 && errno == EINTR) {
  }
  // Signalled (or finished): the run has `delay` to end, when the destructor wakes the
  // thread again; other wakes (a repeated signal) are drained.
  const auto until = std::chrono::steady_clock::now() + delay_;
  while (!finished_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      const std::string line = tool_ + ": " + signal_name(g_received) +
                               ": stopping after the update in progress, if any, and the "
                               "checkpoint; a second signal ends the run at once, keeping the "
                               "checkpoints already written\n";
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
      return;
    }
    char drained[16];
    while (::read(wake_[0], drained, sizeof drained) > 0) {
    }
    if (::poll(&fd, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return;
  }
}

}  // namespace popkit::runner
