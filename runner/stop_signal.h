// SIGINT, SIGTERM and SIGUSR1 during training: the handler only raises a flag; the
// trainer stops the step it is in (abandoned before its update, in one process; else
// finished), writes a checkpoint and stops. SIGUSR1 is the one
// mpirun passes on to the ranks and then exits with their code (SIGINT or SIGTERM to
// mpirun itself aborts the job); `poprun train --processes N` turns both into it. A second
// SIGINT or SIGTERM, either one, gets the default action (the first resets both), so a
// stuck run can still be killed; checkpoints are written atomically, so that loses
// nothing already saved.
// During a run's set-up (planning, reading the data, building the engines: seconds at
// thousands of replicas) there is no step to finish: a SetupWatch ends the process at
// once, undoing what the set-up made, so nothing is left half-written.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace popkit::runner {

// Installs the handlers for its lifetime and restores the previous ones after, but
// SIGUSR1's, which stays ignored; a signal received before (the flag of an earlier run in
// this process) is cleared.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received (SIGINT, SIGTERM or SIGUSR1), or 0.
  [[nodiscard]] static int received();
  // What the stop came from, for "stopped by ...": "SIGINT", "SIGTERM", "SIGUSR1", or in
  // a rank of `poprun --processes N` (launched_by_poprun()) "the launcher", whose SIGINT
  // or SIGTERM mpirun passed on as SIGUSR1.
  [[nodiscard]] static const char* stopped_by();
  // `launcher`: the launcher's pid when it runs on this host (cli/launch.h), else 0. A
  // SIGINT or SIGTERM sent to this rank alone is then passed on to it (as SIGUSR2), so
  // that every rank stops, in the set-up too, where the others would wait for the steps.
  static void launched_by_poprun(pid_t launcher = 0);
  static void clear();
  // For a process mpirun starts, first thing: SIGUSR1, the stop mpirun passes on, waits
  // (blocked) for the handlers instead of ending the rank in its start-up; StopSignals()
  // takes it then.
  static void block_until_handled();

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// While it watches, a stop signal (StopSignals' handler) wakes a thread that runs the
// undo given (removing the run folder the set-up created, releasing its lock), prints
// "<tool>: stopped by SIGTERM during set-up; ..." and ends the process with `exit_code`,
// within milliseconds of the signal. Changes the set-up makes to the file system run
// holding hold(), so the thread never ends the process halfway through one. finish()
// (or the destructor) ends the watch: a later signal is the training loop's.
//
//   SetupWatch watch("poprun", kExitInterrupted);
//   { auto held = watch.hold(); watch.on_stop([&] { folder->abandon(); }); make the folder }
//   ...plan, read, build...
//   watch.finish();
class SetupWatch {
 public:
  SetupWatch(std::string tool, int exit_code);
  ~SetupWatch();
  SetupWatch(const SetupWatch&) = delete;
  SetupWatch& operator=(const SetupWatch&) = delete;

  void on_stop(std::function<void()> undo);
  // Held, the watch waits: the set-up's file-system changes are made whole or not at all.
  [[nodiscard]] std::unique_lock<std::mutex> hold() { return std::unique_lock(mutex_); }
  void finish();

 private:
  void watch();

  std::string tool_;
  int exit_code_;
  int wake_[2] = {-1, -1};
  std::mutex mutex_;
  std::function<void()> undo_;
  bool finished_ = false;
  std::thread thread_;
};

// While it watches (the steps, after the set-up's watch), a stop that has not ended the
// run `delay` after the signal is said, with the way out, so that it never goes unseen:
// a stop waits for the update of a step that had begun (never left half done) and then
// the checkpoint, which at tens of thousands of replicas on a few cores takes a minute.
// "<tool>: SIGTERM: stopping after the update in progress, if any, and the checkpoint;
// a second signal ends the run at once, keeping the checkpoints already written"
class StopNotice {
 public:
  StopNotice(std::string tool, std::chrono::milliseconds delay);
  ~StopNotice();
  StopNotice(const StopNotice&) = delete;
  StopNotice& operator=(const StopNotice&) = delete;

 private:
  void watch();

  std::string tool_;
  std::chrono::milliseconds delay_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace popkit::runner
