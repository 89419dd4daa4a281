// metrics.jsonl: one JSON object per optimizer step, written and flushed as each step
// ends, so `tail -f` and a plotting script follow a run while it trains (the run file
// is written only at the end). Rank 0 writes it; a resumed run's file holds its own
// steps, numbered on from the checkpoint's step.
//
//   {"step":1,"epoch":1,"loss":2.3021,"samples_per_second":18538.2,"learning_rate":0.001,
//    "step_seconds":0.0035,"phase_seconds":{"fc1 forward":0.0004,...}}
//
// A step after which the test set was evaluated (eval.every, at an epoch's end) adds
// "test":{"accuracy":0.9712,"loss":0.0951,"n_samples":10000}: one line a step still, so a
// reader that plots the loss needs no filter, and the run file's `evaluations` agree.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace popkit::runner {

struct StepMetrics {
  std::int64_t step = 0;   // optimizer steps of the whole run, this one included
  std::int64_t epoch = 0;  // 1-based, the epoch the step belongs to
  double loss = 0.0;
  double samples_per_second = 0.0;  // global batch / step_seconds
  double learning_rate = 0.0;
  double step_seconds = 0.0;
  std::vector<std::pair<std::string, double>> phase_seconds;  // in plan order
  struct Test {
    double accuracy = 0.0;  // fraction in [0, 1]
    double loss = 0.0;
    std::int64_t n_samples = 0;
  };
  std::optional<Test> test;  // the evaluation after this step, when one ran
};

class MetricsLog {
 public:
  MetricsLog() = default;  // writes nothing
  // Creates (or truncates) the file. Throws popkit::Error naming it.
  explicit MetricsLog(const std::filesystem::path& path);

  [[nodiscard]] bool open() const { return file_ != nullptr; }
  [[nodiscard]] const std::string& path() const { return path_; }
  // One line, flushed to the kernel (not fsync'd: a reader sees it at once, and a step
  // costs no disk wait). When a write fails (a full disk) the log closes and the reason is
  // returned, for a warning: the run goes on, as its run file holds every step's loss.
  [[nodiscard]] std::string write(const StepMetrics& step);

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> file_;
  std::string path_;
};

}  // namespace popkit::runner
