// mpirun's error stream with OpenMPI's repeating boxes taken out. See mpirun_output.h.
#include "cli/mpirun_output.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace popkit::cli {
namespace {

// A box's border: a line of dashes alone.
bool is_border(const std::string& line) {
  return line.size() >= 20 && line.find_first_not_of('-') == std::string::npos;
}

// The boxes OpenMPI 4 prints about a rank that exited non-zero, called MPI_Abort or was
// killed, and its notes that it held back more of them.
constexpr std::array<std::string_view, 4> kRepeatingBoxes = {
    "terminated normally, but",  // "Primary job  terminated normally, but 1 process returned"
    "detected that one or more processes exited with non-zero status",  // mpirun or mpiexec
    "MPI_ABORT was invoked on rank",
    "noticed that process rank",
};
constexpr std::array<std::string_view, 2> kRepeatingLines = {
    "sent help message",                       // "[host:pid] 1 more process has sent help message"
    "orte_base_help_aggregate\" to 0 to see",  // "Set MCA parameter ... to see all help"
};

template <std::size_t N>
bool holds_any(const std::string& text, const std::array<std::string_view, N>& needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return text.find(n) != std::string::npos; });
}

}  // namespace

void MpirunStderr::write(const std::string& text) {
  said_ = said_ || !text.empty();
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(out_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: nothing to tell
    done += static_cast<std::size_t>(n);
  }
}

void MpirunStderr::line(const std::string& text) {
  const std::string bare = text.substr(0, text.find_last_not_of("\r\n") + 1);
  if (in_box_) {
    box_ += text;
    if (!is_border(bare)) return;
    in_box_ = false;
    if (!holds_any(box_, kRepeatingBoxes)) write(box_);
    box_.clear();
    return;
  }
  if (is_border(bare)) {
    in_box_ = true;
    box_ = text;
    return;
  }
  // mpirun says "Forwarding signal 10 to job" each time the launcher passes its stop on,
  // which it repeats until mpirun exits: once is news.
  if (bare.find("Forwarding signal") != std::string::npos) {
    if (forwarded_) return;
    forwarded_ = true;
  }
  if (!holds_any(bare, kRepeatingLines)) write(text);
}

void MpirunStderr::feed(std::string_view bytes) {
  partial_.append(bytes);
  std::size_t start = 0;
  for (std::size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1)
    line(partial_.substr(start, end + 1 - start));
  partial_.erase(0, start);
}

void MpirunStderr::finish() {
  if (!partial_.empty()) line(partial_);
  partial_.clear();
  write(box_);
  box_.clear();
  in_box_ = false;
}

}  // namespace popkit::cli
