// A run folder's lock (flock on .poprun.lock). See run_lock.h.
#include "runner/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "base/error.h"
#include "runner/agreement.h"

namespace popkit::runner {
namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "an unknown host";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

// Who holds the lock, as its file says. The holder writes it just after it takes the
// lock, so a file still empty is given a moment before it is called unknown.
std::string holder_of(const fs::path& path) {
  std::string text;
  for (int attempt = 0; attempt < 20 && text.empty(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) break;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
    ::close(fd);
    if (n > 0) text.assign(buffer, static_cast<std::size_t>(n));
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  // Only what a holder writes is shown: printable text on one line.
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f) c = ' ';
  return text.empty() ? "a process that has not said who it is" : text;
}

bool same_file(int fd, const fs::path& path) {
  struct stat open_one {
  }, named{};
  return ::fstat(fd, &open_one) == 0 && ::lstat(path.c_str(), &named) == 0 &&
         open_one.st_dev == named.st_dev && open_one.st_ino == named.st_ino;
}

}  // namespace

RunLock::RunLock(RunLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

RunLock::~RunLock() {
  release();
}

void RunLock::release() {
  if (fd_ < 0) return;
  // Removed while still held: a process that opened the file before the unlink and
  // takes the lock after the close finds its file gone from the folder, and tries again.
  ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

RunLock RunLock::acquire(const fs::path& dir, const std::string& command) {
  RunLock lock;
  lock.path_ = (dir.empty() ? fs::path(".") : dir) / kLockFileName;
  const std::string& path = lock.path_.string();
  // A lock file removed by its holder between our open and our flock is not the folder's
  // lock any more: open again (a few times; each round is another run's whole life).
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
      throw Error("{}: cannot create the run folder's lock file: {}", path, std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      ::close(fd);
      if (error != EWOULDBLOCK)
        throw Error("{}: cannot lock the run folder: {}", path, std::strerror(error));
      throw InputRefused(fmt::format(
          "{} is in use by another run: {}; two runs in one folder would mix their checkpoints "
          "and metrics: wait for it to end, or give another --run-dir",
          dir.string(), holder_of(lock.path_)));
    }
    if (!same_file(fd, lock.path_)) {
      ::close(fd);
      continue;
    }
    lock.fd_ = fd;
    const std::string who =
        fmt::format("pid {} on host {} since {}: {}", ::getpid(), host_name(), utc_now(), command);
    // Who holds it is for the message of a run refused: a full disk leaves it unsaid,
    // and the lock holds all the same.
    if (::ftruncate(fd, 0) == 0) {
      [[maybe_unused]] const ssize_t written = ::pwrite(fd, who.data(), who.size(), 0);
    }
    return lock;
  }
  throw Error("{}: the lock file kept being replaced while it was taken", path);
}

}  // namespace popkit::runner
