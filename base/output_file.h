// Writing a file whole or not at all, the one way every tool does it (run files,
// checkpoints): the bytes go to a temporary in the same folder, are flushed to disk and
// renamed over the target, and the folder is flushed so the rename survives a crash. A
// crash or kill at any moment leaves the previous file intact; any failure removes the
// temporary and throws popkit::Error "PATH: what failed: strerror", naming the path the
// caller gave (the temporary is no name a user knows).
//
//   AtomicFile out(path, TemporaryName::kSuffix);
//   out.write(text.data(), text.size());
//   out.commit();
#pragma once

#include <cstddef>
#include <string>

namespace popkit {

enum class TemporaryName {
  kSuffix,            // "<path>.tmp": one writer per path (a run file)
  kHiddenPerProcess,  // "<dir>/.<name>.tmp-<pid>": processes may write beside each other
};

// Why no file can be written at `path`, found before any work is done: "'no/such/x.yaml':
// the folder 'no/such' does not exist", "'.' is a folder, not a file name", or "" when
// the folder is there (whether it may be written is found by writing).
std::string output_path_problem(const std::string& path);

// The temporary `path` is written through: what the writer uses and what a later run
// looks for to remove what a killed one left.
std::string temporary_path(const std::string& path, TemporaryName naming);

class AtomicFile {
 public:
  // Opens the temporary (O_NOFOLLOW: a link planted at its predictable name is not
  // written through).
  AtomicFile(std::string path, TemporaryName naming);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // without commit(): the temporary is removed

  void write(const void* data, std::size_t size);
  void commit();

  [[nodiscard]] const std::string& temporary() const { return tmp_; }

 private:
  [[noreturn]] void fail(const std::string& what);

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
};

}  // namespace popkit
