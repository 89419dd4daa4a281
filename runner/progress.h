// Training progress on standard error: a bar redrawn in place when it is a terminal
// (percentage, epoch i/N, step/total, elapsed<remaining, steps/s, samples/s, loss), cut
// to the terminal's width so a redraw never wraps, plain lines about
// every tenth of the run when it is not (logs, CI), nothing with --quiet. Notes (a
// dropped partial batch, a resume, an evaluation every N epochs) are lines in every style,
// kNone too: they are what the user must know.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace popkit::runner {

enum class ProgressStyle { kNone, kLines, kBar };

// kBar when standard error is a terminal, else kLines; kNone when quiet.
ProgressStyle progress_style_for_stderr(bool quiet);

struct ProgressTick {
  std::int64_t epoch = 0;        // 1-based epoch the step belonged to
  std::int64_t n_epochs = 0;     // 0 when the run is limited by steps only
  std::int64_t step = 0;         // optimizer steps done, the whole run
  std::int64_t total_steps = 0;  // where the run will stop
  std::int64_t first_step = 0;   // steps done when this process started (resume)
  double elapsed_seconds = 0.0;  // since this process started training
  std::int64_t global_batch_size = 0;
  double loss = 0.0;  // of the step just done
};

// "epoch 2/5 step 1200/6250 19% 00:12<00:48 98.1 steps/s 6,278 samples/s loss 0.2345"
std::string progress_text(const ProgressTick& tick);

// progress_text without the rates, for narrow terminals:
// "epoch 2/5 step 1200/6250 19% 00:12<00:48 loss 0.2345"
std::string compact_progress_text(const ProgressTick& tick);

// The number of the epoch a run limited by steps ends in (1-based), for "epoch i/N":
// it starts in 0-based epoch `epoch` with `batches_done` of that epoch's
// `steps_per_epoch` batches behind it and has `steps_to_go` steps left. 0 when unknown.
std::int64_t last_epoch(std::int64_t epoch, std::int64_t batches_done, std::int64_t steps_to_go,
                        std::int64_t steps_per_epoch);

// The width of the terminal on standard error: TIOCGWINSZ, else $COLUMNS, else 80.
int terminal_columns();

// "[=====>    ] " and the progress text, at most `columns` - 1 characters: a line as
// wide as the terminal wraps on some terminals, and a wrapped bar cannot be redrawn in
// place. The bar narrows first (down to 10 cells), then the rates go, then the bar, then
// the text is cut.
std::string progress_bar_line(const ProgressTick& tick, int columns);

class Progress {
 public:
  // `columns`: the width to fit the bar to; 0 asks the terminal on every redraw (it may
  // be resized while training runs).
  Progress(std::ostream& out, ProgressStyle style, int columns = 0)
      : out_(out), style_(style), columns_(columns) {}
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(const ProgressTick& tick);
  void note(const std::string& line);
  // Ends a bar's line; further updates start a new one.
  void finish();

 private:
  std::ostream& out_;
  ProgressStyle style_;
  int columns_ = 0;
  bool bar_open_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace popkit::runner
