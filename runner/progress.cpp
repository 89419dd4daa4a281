#include "runner/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "base/units.h"

namespace popkit::runner {
namespace {

constexpr int kBarWidth = 24;
constexpr int kMinBarWidth = 10;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
constexpr std::int64_t kLinesPerRun = 10;

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<std::int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

}  // namespace

ProgressStyle progress_style_for_stderr(bool quiet) {
  if (quiet) return ProgressStyle::kNone;
  return ::isatty(STDERR_FILENO) ? ProgressStyle::kBar : ProgressStyle::kLines;
}

std::string progress_text(const ProgressTick& t) {
  const auto done_here = static_cast<double>(t.step - t.first_step);
  const double steps_per_second = t.elapsed_seconds > 0 ? done_here / t.elapsed_seconds : 0.0;
  const double remaining =
      steps_per_second > 0 ? static_cast<double>(t.total_steps - t.step) / steps_per_second : -1.0;
  const std::string epoch = t.n_epochs > 0 ? fmt::format("epoch {}/{}", t.epoch, t.n_epochs)
                                           : fmt::format("epoch {}", t.epoch);
  // Truncated, not rounded: 100% only when the last step is done.
  const std::int64_t percent =
      t.total_steps > 0
          ? std::clamp<std::int64_t>(static_cast<std::int64_t>(100.0 * static_cast<double>(t.step) /
                                                               static_cast<double>(t.total_steps)),
                                     0, 100)
          : 0;
  return fmt::format("{} step {}/{} {}% {}<{} {:.1f} steps/s {} samples/s loss {:.4f}", epoch,
                     t.step, t.total_steps, percent, clock_text(t.elapsed_seconds),
                     clock_text(remaining), steps_per_second,
                     format_thousands(steps_per_second * static_cast<double>(t.global_batch_size)),
                     t.loss);
}

std::string compact_progress_text(const ProgressTick& t) {
  const std::string full = progress_text(t);
  // Everything before the rates, and the loss: "epoch 1/2 step 750/3000 25% 00:10<00:30".
  const std::size_t cut = full.rfind(' ', full.find(" steps/s") - 1);
  return full.substr(0, cut) + full.substr(full.rfind(" loss "));
}

std::int64_t last_epoch(std::int64_t epoch, std::int64_t batches_done, std::int64_t steps_to_go,
                        std::int64_t steps_per_epoch) {
  if (steps_per_epoch <= 0 || steps_to_go <= 0 ||
      steps_to_go > std::numeric_limits<std::int64_t>::max() / 2)
    return 0;
  // 0-based epoch of the last step = epoch + (batches_done + steps_to_go - 1) / steps_per_epoch
  return epoch + (batches_done + steps_to_go - 1) / steps_per_epoch + 1;
}

int terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    const int n = std::atoi(columns);
    if (n > 0) return n;
  }
  return 80;
}

std::string progress_bar_line(const ProgressTick& t, int columns) {
  const auto room = static_cast<std::ptrdiff_t>(std::max(columns - 1, 1));
  const double fraction =
      t.total_steps > 0
          ? std::clamp(static_cast<double>(t.step) / static_cast<double>(t.total_steps), 0.0, 1.0)
          : 1.0;
  // "[" bar "] " text: the bar takes what the text leaves, kBarWidth at most.
  const auto with_bar = [&](const std::string& text) -> std::optional<std::string> {
    const std::ptrdiff_t left = room - static_cast<std::ptrdiff_t>(text.size()) - 3;
    const int width = static_cast<int>(std::min<std::ptrdiff_t>(kBarWidth, left));
    if (width < kMinBarWidth) return std::nullopt;
    const int filled = static_cast<int>(fraction * width);
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < width) bar += '>';
    bar.resize(static_cast<std::size_t>(width), ' ');
    return "[" + bar + "] " + text;
  };
  const std::string text = progress_text(t);
  if (auto line = with_bar(text)) return *line;
  // Narrow terminals: the rates go first, the loss and the position stay.
  const std::string compact = compact_progress_text(t);
  if (auto line = with_bar(compact)) return *line;
  return compact.substr(0, static_cast<std::size_t>(room));
}

void Progress::update(const ProgressTick& t) {
  if (style_ == ProgressStyle::kNone) return;
  const bool last = t.step >= t.total_steps;
  if (style_ == ProgressStyle::kLines) {
    const std::int64_t every = std::max<std::int64_t>(1, t.total_steps / kLinesPerRun);
    if (last || t.step == t.first_step + 1 || t.step % every == 0)
      out_ << progress_text(t) << '\n' << std::flush;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!last && bar_open_ && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  // \r and erase-to-end-of-line redraw the bar in place.
  out_ << '\r' << progress_bar_line(t, columns_ > 0 ? columns_ : terminal_columns()) << "\x1b[K"
       << std::flush;
  bar_open_ = true;
}

void Progress::note(const std::string& line) {
  if (bar_open_) out_ << "\r\x1b[K";
  out_ << line << '\n' << std::flush;
  bar_open_ = false;
}

void Progress::finish() {
  if (bar_open_) out_ << '\n' << std::flush;
  bar_open_ = false;
}

}  // namespace popkit::runner
