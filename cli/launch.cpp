// The launcher of `poprun ... --processes N` (launch.h): the mpirun command line, and
// mpirun run in a process group of its own with the signals turned into its clean stop.
#include "cli/launch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "cli/mpirun_output.h"
#include "cli/tool.h"
#include "engine/runtime/world.h"

#ifndef POPKIT_MPIEXEC
#define POPKIT_MPIEXEC "mpirun"
#endif

namespace popkit::cli {
namespace {

// The launcher's arguments, joined by the unit separator, for the ranks to record.
constexpr const char* kLaunchArguments = "POPKIT_LAUNCH_ARGUMENTS";
// The launcher's pid, for a rank on its host to pass on a signal sent to it alone.
constexpr const char* kLauncherPid = "POPKIT_LAUNCHER_PID";

volatile std::sig_atomic_t g_mpirun = 0;   // its pid, once started
volatile std::sig_atomic_t g_signals = 0;  // 1: stopping the ranks, 2: aborting them
volatile std::sig_atomic_t g_direct = 0;   // SIGINT/SIGTERM to the launcher itself so far

// The first signal asks the ranks to stop after their step: pass_on_until_exit sends
// mpirun SIGUSR1, which it passes on, until mpirun exits (mpirun drops one that comes
// before it has started the ranks). The second is mpirun's own abort.
extern "C" void on_launcher_signal(int signal) {
  const bool first = g_direct == 0;
  g_direct = 1;
  g_signals = first ? 1 : 2;
  static constexpr char kStopInt[] = "poprun: SIGINT: stopping the ranks (signal again to abort)\n";
  static constexpr char kStopTerm[] =
      "poprun: SIGTERM: stopping the ranks (signal again to abort)\n";
  static constexpr char kAbort[] = "poprun: aborting the ranks\n";
  if (first) {
    const bool sigint = signal == SIGINT;
    [[maybe_unused]] const auto n = write(STDERR_FILENO, sigint ? kStopInt : kStopTerm,
                                          (sigint ? sizeof kStopInt : sizeof kStopTerm) - 1);
    return;
  }
  [[maybe_unused]] const auto n = write(STDERR_FILENO, kAbort, sizeof kAbort - 1);
  if (const pid_t pid = g_mpirun; pid > 0) kill(pid, SIGTERM);
}

// SIGUSR2: a rank on this host was sent SIGINT or SIGTERM alone (runner/stop_signal.h)
// and passed it on, so that every rank stops, as after a signal to the launcher. Only a
// signal to the launcher itself counts towards the abort: a scheduler that signals every
// process of the job may reach the ranks first.
extern "C" void on_rank_signal(int /*signal*/) {
  if (g_signals != 0) return;
  g_signals = 1;
  static constexpr char kStop[] = "poprun: a rank was signalled: stopping the ranks\n";
  [[maybe_unused]] const auto n = write(STDERR_FILENO, kStop, sizeof kStop - 1);
}

// The launcher's handlers while it runs mpirun; the earlier ones restored after.
class LauncherSignals {
 public:
  LauncherSignals() {
    g_signals = 0;
    g_direct = 0;
    struct sigaction action {};
    action.sa_handler = on_launcher_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    action.sa_handler = on_rank_signal;
    sigaction(SIGUSR2, &action, &old_usr2_);
  }
  ~LauncherSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR2, &old_usr2_, nullptr);
    g_mpirun = 0;
  }
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_usr2_ {};
};

// --processes and --hostfile with their values, in either spelling (`--x v`, `--x=v`).
bool is_launch_option(std::string_view arg) {
  return arg == "--processes" || arg == "--hostfile";
}
bool is_launch_option_with_value(std::string_view arg) {
  return arg.starts_with("--processes=") || arg.starts_with("--hostfile=");
}

// What /proc/PID/status says of a process's parent and signals.
struct ProcStatus {
  long ppid = -1;
  std::uint64_t blocked = 0;  // SigBlk
  std::uint64_t caught = 0;   // SigCgt
};
ProcStatus proc_status(const std::filesystem::path& file) {
  std::ifstream status(file);
  std::string line;
  ProcStatus out;
  while (std::getline(status, line)) {
    if (line.starts_with("PPid:")) out.ppid = std::strtol(line.c_str() + 5, nullptr, 10);
    if (line.starts_with("SigBlk:")) out.blocked = std::strtoull(line.c_str() + 7, nullptr, 16);
    if (line.starts_with("SigCgt:")) out.caught = std::strtoull(line.c_str() + 7, nullptr, 16);
  }
  return out;
}

// Whether `want` ranks, mpirun's children here, each hold SIGUSR1 blocked or handled
// (/proc/PID/status: SigBlk, SigCgt), so that one mpirun passes on now stops the run; a
// rank in its start-up, before poprun's main(), would end on it. mpirun passes SIGUSR1
// on from when it has started its ranks, and drops one that comes before.
bool ranks_hold_stop(pid_t mpirun, int want) {
  constexpr std::uint64_t kUsr1 = std::uint64_t{1} << (SIGUSR1 - 1);
  int ready = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const ProcStatus st = proc_status(entry.path() / "status");
    if (st.ppid == mpirun && ((st.blocked | st.caught) & kUsr1) != 0) ++ready;
  }
  return ready >= want;
}

// Whether `pid` catches `signal` now (/proc/PID/status: SigCgt). mpirun resets its
// handlers as it ends, and SIGUSR1 would then kill it: a repeated stop is sent only while
// it would be passed on.
bool catches(pid_t pid, int signal) {
  return ((proc_status(fmt::format("/proc/{}/status", pid)).caught >> (signal - 1)) & 1) != 0;
}

// Passes mpirun's error stream on through `err` until mpirun exits and the stream is
// drained (a process it left behind may hold the pipe open: it is not waited for).
pid_t pass_on_until_exit(pid_t pid, int local_ranks, int fd, MpirunStderr& err, int& status) {
  using Clock = std::chrono::steady_clock;
  // Without local ranks to look at: long enough for mpirun's handlers and the ranks'.
  constexpr auto kRanksUp = std::chrono::seconds(2);
  constexpr auto kRepeat = std::chrono::milliseconds(200);
  const Clock::time_point started = Clock::now();
  Clock::time_point sent{};
  char buffer[4096];
  pid_t done = 0;
  while (true) {
    if (g_signals == 1 && Clock::now() - sent >= kRepeat &&
        (local_ranks > 0 ? ranks_hold_stop(pid, local_ranks)
                         : Clock::now() - started >= kRanksUp) &&
        catches(pid, SIGUSR1)) {
      kill(pid, SIGUSR1);
      sent = Clock::now();
    }
    pollfd readable{fd, POLLIN, 0};
    const int ready = poll(&readable, 1, 200);
    if (ready > 0) {
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n > 0) {
        err.feed(std::string_view(buffer, static_cast<std::size_t>(n)));
        continue;
      }
      if (n == 0 || errno != EINTR) break;  // the stream ended
    }
    if (done == 0 && (done = waitpid(pid, &status, WNOHANG)) != 0) {
      // Exited (or failed): what it wrote is in the pipe, read without waiting for more.
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;)
        err.feed(std::string_view(buffer, static_cast<std::size_t>(n)));
      break;
    }
  }
  err.finish();
  while (done == 0 && (done = waitpid(pid, &status, 0)) < 0 && errno == EINTR) done = 0;
  return done;
}

// The launcher's exit code: mpirun's when it is one of poprun's (0, 1, 2, 130); a rank
// killed by a signal, or mpirun failing on its own (its message passed on above), is a
// run-time failure, said here.
int exit_code_of(int status, bool mpirun_said_something, const std::string& where) {
  if (WIFSIGNALED(status)) {
    std::cerr << fmt::format("{}: error: mpirun was killed by signal {} ({})\n", where,
                             WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 1;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (code == 0 || code == 1 || code == 2 || code == 130) return code;
  // mpirun reports a rank killed by a signal as 128 + the signal.
  if (code > 128 && code - 128 <= SIGRTMAX)
    std::cerr << fmt::format("{}: error: a rank was killed by signal {} ({})\n", where, code - 128,
                             strsignal(code - 128));
  else
    std::cerr << fmt::format("{}: error: mpirun could not run the ranks (exit code {}){}\n", where,
                             code, mpirun_said_something ? "; its message is above" : "");
  return 1;
}

}  // namespace

bool wants_ranks(const Launch& launch) {
  if (launch.processes <= 1) return false;
  if (engine::launched_by_mpirun())
    throw Error(
        "--processes {} under mpirun: mpirun started this process as a rank already; leave "
        "out --processes, or run `poprun ... --processes {}` without mpirun",
        launch.processes, launch.processes);
  if (!launch.hostfile.empty()) {
    // mpirun's own refusal of a hostfile it cannot read is long and vague; say it here.
    const int fd = open(launch.hostfile.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw Error("--hostfile {}: {}: give mpirun's hostfile, a host per line (docs/multi-host.md)",
                  launch.hostfile, std::strerror(errno));
    close(fd);
  }
  if (!engine::mpi_built_in())
    throw Error(
        "--processes {}: this poprun was built without MPI; install libopenmpi-dev and "
        "openmpi-bin (scripts/install_deps.sh) and build again",
        launch.processes);
  return true;
}

std::vector<std::string> mpirun_command(const Launch& launch,
                                        const std::vector<std::string>& arguments) {
  const char* env = std::getenv("POPKIT_MPIRUN");
  std::vector<std::string> command{env != nullptr && *env != '\0' ? env : POPKIT_MPIEXEC, "-np",
                                   std::to_string(launch.processes)};
  if (!launch.hostfile.empty()) {
    command.insert(command.end(), {"--hostfile", launch.hostfile});
  } else if (launch.processes > static_cast<int>(std::thread::hardware_concurrency())) {
    command.emplace_back("--oversubscribe");
  }
  // The ranks read no terminal input (a process group of its own must not try to). They
  // speak for themselves (a rank's error is printed by poprun with its rank), so the
  // launcher takes out OpenMPI's boxes that repeat it, and passes on mpirun's own
  // messages, which --quiet would hide (cli/mpirun_output.h).
  command.insert(command.end(), {"--stdin", "none"});
  // When a rank exits with a code other than 0 (130 after a stop), OpenMPI ends the job:
  // it sends SIGTERM to the ranks, waits this many seconds (1 by default) even when
  // every rank has exited, and kills those left. Under the launcher a stop reaches every
  // rank (mpirun passes SIGUSR1 on), which ends at once in its set-up or after its
  // checkpoint and MPI_Finalize, so the wait would only delay the exit past a second.
  command.insert(command.end(), {"--mca", "odls_base_sigkill_timeout", "0"});
  std::string joined;
  for (const std::string& arg : arguments) joined += (joined.empty() ? "" : "\x1f") + arg;
  command.insert(command.end(), {"-x", fmt::format("{}={}", kLaunchArguments, joined), "-x",
                                 fmt::format("{}={}", kLauncherPid, getpid())});
  // The ranks run this very binary (on other hosts, at the same path).
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  command.push_back(error ? std::string("poprun") : self.string());
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (is_launch_option(arguments[i])) {
      ++i;  // and its value
      continue;
    }
    if (is_launch_option_with_value(arguments[i])) continue;
    command.push_back(arguments[i]);
  }
  return command;
}

bool started_by_launcher() {
  const char* joined = std::getenv(kLaunchArguments);
  return joined != nullptr && *joined != '\0' && std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

pid_t launcher_here() {
  if (!started_by_launcher()) return 0;
  const char* given = std::getenv(kLauncherPid);
  if (given == nullptr) return 0;
  const long launcher = std::strtol(given, nullptr, 10);
  // mpirun starts the ranks on its own host itself: this rank's grandparent is then the
  // launcher (on another host it is mpirun's daemon's parent).
  std::ifstream status(fmt::format("/proc/{}/status", getppid()));
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("PPid:")) {
      return launcher > 1 && std::strtol(line.c_str() + 5, nullptr, 10) == launcher
                 ? static_cast<pid_t>(launcher)
                 : 0;
    }
  }
  return 0;
}

std::vector<std::string> launch_arguments(const std::vector<std::string>& own) {
  if (!started_by_launcher()) return own;
  const char* joined = std::getenv(kLaunchArguments);
  std::vector<std::string> arguments;
  for (std::string_view rest = joined; !rest.empty();) {
    const std::size_t end = std::min(rest.find('\x1f'), rest.size());
    arguments.emplace_back(rest.substr(0, end));
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  return arguments;
}

int run_ranks(const std::vector<std::string>& command, int local_ranks, const std::string& where) {
  // Watched from here: a stop before mpirun starts ends the launch with nothing run.
  const LauncherSignals signals;
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  // A pipe closed on exec tells the parent whether exec worked; another carries mpirun's
  // error stream (the ranks' too) through the filter.
  int status_pipe[2], err_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw Error("pipe: {}", std::strerror(errno));
  if (g_signals != 0) {
    std::cerr << where << ": stopped before the ranks started: nothing was run\n";
    return kExitInterrupted;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork: {}", std::strerror(errno));
  if (pid == 0) {
    close(status_pipe[0]);
    close(err_pipe[0]);
    dup2(err_pipe[1], STDERR_FILENO);
    setpgid(0, 0);
    // mpirun goes (and takes its ranks) when the launcher dies.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    execvp(argv[0], argv.data());
    const int error = errno;
    [[maybe_unused]] const auto n = write(status_pipe[1], &error, sizeof error);
    _exit(127);
  }
  setpgid(pid, pid);
  close(status_pipe[1]);
  close(err_pipe[1]);
  int exec_error = 0;
  ssize_t got = 0;
  while ((got = read(status_pipe[0], &exec_error, sizeof exec_error)) < 0 && errno == EINTR) {
  }
  close(status_pipe[0]);
  if (got == sizeof exec_error) {
    close(err_pipe[0]);
    waitpid(pid, nullptr, 0);
    throw Error("cannot run {}: {} (set POPKIT_MPIRUN to mpirun's path)", command[0],
                std::strerror(exec_error));
  }

  g_mpirun = pid;
  if (g_signals == 2) kill(pid, SIGTERM);  // aborted while it started
  MpirunStderr err(STDERR_FILENO);
  int status = 0;
  const pid_t done = pass_on_until_exit(pid, local_ranks, err_pipe[0], err, status);
  close(err_pipe[0]);
  if (done < 0) throw Error("waiting for {}: {}", command[0], std::strerror(errno));
  return exit_code_of(status, err.said_anything(), where);
}

}  // namespace popkit::cli
