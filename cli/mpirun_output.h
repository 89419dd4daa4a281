// What of mpirun's error stream the launcher (cli/launch.h) passes on: everything but
// the boxes OpenMPI prints when a rank exits non-zero, aborts or is killed, which only
// repeat what poprun's rank printed (its error, with its rank) or the launcher says (the
// signal). So mpirun's own messages -- a hostfile it cannot read, a host it cannot reach,
// a daemon it cannot start -- reach the user, and a failed rank's error shows once; so
// does mpirun's "Forwarding signal", which the launcher's repeated stop would repeat.
//
//   MpirunStderr filter(STDERR_FILENO);
//   while ((n = read(pipe, buffer, size)) > 0) filter.feed({buffer, n});
//   filter.finish();
#pragma once

#include <string>
#include <string_view>

namespace popkit::cli {

class MpirunStderr {
 public:
  explicit MpirunStderr(int out_fd) : out_fd_(out_fd) {}

  // Passes on each whole line (or box, once it is whole) that is kept.
  void feed(std::string_view bytes);
  // At the end of the stream: what is still held (a last line, an open box) is passed on.
  void finish();

  // Whether anything was passed on: mpirun (or a rank) said something.
  [[nodiscard]] bool said_anything() const { return said_; }

 private:
  void line(const std::string& text);
  void write(const std::string& text);

  int out_fd_;
  std::string partial_;  // a line not yet ended
  std::string box_;      // the lines of a box not yet closed
  bool in_box_ = false;
  bool said_ = false;
  bool forwarded_ = false;  // mpirun said it forwarded a signal
};

}  // namespace popkit::cli
