// Opening the files a tool reads (configs, data, checkpoints, plan and run files) in
// one way: only a regular file is read. A FIFO, a device such as /dev/zero or a socket
// would block or never end, and a directory is not a file; each gets its own reason,
// found without blocking (opened O_NONBLOCK, then fstat), so the check and the read see
// the same file.
//
//   InputFile file = open_input_file(path, "a run file");   // throws popkit::Error
//   std::string text = file.read_all(kMaxBytes);
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace popkit {

class InputFile {
 public:
  InputFile(int fd, std::string path, std::uint64_t size)
      : fd_(fd), path_(std::move(path)), size_(size) {}
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  ~InputFile();

  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  // Reads up to n bytes at the current position; fewer only at the end of the file.
  std::size_t read(void* data, std::size_t n);
  // The whole file. A file larger than max_bytes is refused before anything is read:
  // "PATH: N bytes, more than the M a WHAT may have".
  std::string read_all(std::uint64_t max_bytes, const std::string& what = "file");

 private:
  int fd_;
  std::string path_;
  std::uint64_t size_;
};

// Why `path` cannot be read as a regular file ("no such file", "is a directory", "is
// not a regular file (a FIFO)", "cannot open: Permission denied"), or "" when it can.
// For checks before work starts; open_input_file is the one to read with.
std::string input_file_problem(const std::string& path);

// Opens `path` for reading. Throws popkit::Error "PATH: REASON" with the reasons above;
// `hint` (e.g. "give the path of a run file") is appended to the directory and
// not-regular reasons when given.
InputFile open_input_file(const std::string& path, const std::string& hint = "");

// Whether `path`'s name ends in one of `extensions` (".yaml"; ASCII case ignored). A
// diagnostic shows a file's lines only when its name says it is the kind of file read,
// so that no error prints the contents of a file given by mistake (/etc/passwd as a
// config).
bool named_as(std::string_view path, std::initializer_list<std::string_view> extensions);

}  // namespace popkit
