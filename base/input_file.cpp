// Opening input files: regular files only, decided on the open descriptor.
#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace popkit {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

// Opens without blocking (a FIFO with no writer would block a plain open) and checks
// the descriptor: returns the fd, or -1 with the reason in `why`.
int open_regular(const std::string& path, std::string& why, std::uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    why = errno == ENOENT ? "no such file" : fmt::format("cannot open: {}", std::strerror(errno));
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = fmt::format("cannot open: {}", std::strerror(errno));
    ::close(fd);
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    why = "is a directory";
  } else if (!S_ISREG(st.st_mode)) {
    why = fmt::format("is not a regular file ({})", kind_of(st.st_mode));
  } else {
    // Regular files never block; reads go back to the ordinary blocking mode.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    size = static_cast<std::uint64_t>(st.st_size);
    return fd;
  }
  ::close(fd);
  return -1;
}

}  // namespace

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), size_(other.size_) {}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t InputFile::read(void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd_, p + done, n - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error("{}: cannot read: {}", path_, std::strerror(errno));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::string InputFile::read_all(std::uint64_t max_bytes, const std::string& what) {
  if (size_ > max_bytes) {
    throw Error("{}: {} bytes, more than the {} a {} may have", path_, size_, max_bytes, what);
  }
  std::string bytes(static_cast<std::size_t>(size_), '\0');
  const std::size_t got = read(bytes.data(), bytes.size());
  // A file that shrank while being read is read as it is now; one that grew is cut
  // at the size it had when opened, so max_bytes holds.
  bytes.resize(got);
  return bytes;
}

std::string input_file_problem(const std::string& path) {
  std::string why;
  std::uint64_t size = 0;
  const int fd = open_regular(path, why, size);
  if (fd >= 0) ::close(fd);
  return why;
}

InputFile open_input_file(const std::string& path, const std::string& hint) {
  std::string why;
  std::uint64_t size = 0;
  const int fd = open_regular(path, why, size);
  if (fd < 0) {
    const bool add_hint = !hint.empty() && why.rfind("is ", 0) == 0;
    throw Error("{}: {}{}", path, why, add_hint ? "; " + hint : "");
  }
  return InputFile(fd, path, size);
}

bool named_as(std::string_view path, std::initializer_list<std::string_view> extensions) {
  const auto lower = [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  for (const std::string_view ext : extensions) {
    if (path.size() < ext.size()) continue;
    const std::string_view end = path.substr(path.size() - ext.size());
    if (std::equal(end.begin(), end.end(), ext.begin(),
                   [&](char a, char b) { return lower(a) == b; }))
      return true;
  }
  return false;
}

}  // namespace popkit
