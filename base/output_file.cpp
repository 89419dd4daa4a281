// Atomic file writes: temporary, fsync, rename, fsync of the folder.
#include "base/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/error.h"

namespace popkit {

std::string output_path_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (path.empty()) return "an empty path is not a file name";
  if (fs::is_directory(target, ec)) return fmt::format("'{}' is a folder, not a file name", path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (fs::is_directory(folder, ec)) return "";
  if (fs::exists(folder, ec))
    return fmt::format("'{}': '{}' is not a folder", path, folder.string());
  return fmt::format("'{}': the folder '{}' does not exist", path, folder.string());
}

std::string temporary_path(const std::string& path, TemporaryName naming) {
  if (naming == TemporaryName::kSuffix) return path + ".tmp";
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  return (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
}

AtomicFile::AtomicFile(std::string path, TemporaryName naming)
    : path_(std::move(path)), tmp_(temporary_path(path_, naming)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("{}: cannot open for writing: {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::fail(const std::string& what) {
  const std::string why = fmt::format("{}: {}: {}", path_, what, std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  throw Error("{}", why);
}

void AtomicFile::write(const void* data, std::size_t size) {
  POPKIT_ASSERT(fd_ >= 0);
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  POPKIT_ASSERT(fd_ >= 0);
  if (::fsync(fd_) != 0) fail("cannot flush to disk");
  const int fd = std::exchange(fd_, -1);  // from here on, the destructor has nothing to do
  std::string failed;
  if (::close(fd) != 0) {
    failed = fmt::format("cannot write: {}", std::strerror(errno));
  } else if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    failed = fmt::format("cannot move the written file into place: {}", std::strerror(errno));
  }
  if (!failed.empty()) {
    ::unlink(tmp_.c_str());
    throw Error("{}: {}", path_, failed);
  }
  // The rename itself, durable.
  const std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace popkit
