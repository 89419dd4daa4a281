// A run folder's lock: the process that writes a run (rank 0 under mpirun) holds an flock
// on <run folder>/.poprun.lock from before it looks at the folder until the run ends, so
// a second run on the folder is refused at once, naming the holder, instead of both
// writing metrics.jsonl and checkpoints into it. The file holds who the holder is (pid,
// host, start time, command line); the kernel releases the lock when the holder dies
// however it dies, so a lock file left by a killed run is taken over, not obeyed.
//
//   RunLock lock = RunLock::acquire("runs/quick/a", "poprun train quick.yaml");  // or throws
//   ...write the run...
//   // ~RunLock: the file is removed and the lock released
#pragma once

#include <filesystem>
#include <string>

namespace popkit::runner {

inline constexpr const char* kLockFileName = ".poprun.lock";

class RunLock {
 public:
  RunLock() = default;  // holds nothing
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  // Takes the lock of the folder `dir` (which must exist) for `command`. Another
  // process's lock is refused without waiting: InputRefused (exit 2) "DIR is in use by
  // another run: pid 4711 on host a since ...: COMMAND". Other failures (a folder that
  // cannot be written) throw popkit::Error.
  static RunLock acquire(const std::filesystem::path& dir, const std::string& command);

  [[nodiscard]] bool held() const { return fd_ >= 0; }
  // Removes the lock file and releases the lock (the destructor does it too).
  void release();

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace popkit::runner
