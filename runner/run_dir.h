// A run's folder: where `poprun train` writes its run file, its checkpoints and its
// metrics.jsonl, so that two runs of one config never overwrite each other or mix their
// checkpoints. By default each run gets a new folder runs/<config name>/<stamp>/ and
// runs/<config name>/latest (a symbolic link) names the newest; --run-dir DIR or
// -o FILE choose the folder instead, and a folder that holds a run is refused without
// --force. Also what `--resume latest|RUN_DIR|CKPT` resolves to, and the earlier run's
// history (losses and step times) that a resumed run's file carries.
//
//   RunFolderRequest want{.config_name = "quick"};
//   RunPaths paths = make_run_paths(want, std::time(nullptr));  // runs/quick/20261125-174501
//   ...the run's setup succeeds...
//   point_latest(paths);                                        // runs/quick/latest -> it
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/run_folder.h"
#include "reports/run_record.h"
#include "runner/run_lock.h"

namespace popkit::runner {

inline constexpr const char* kRunFileName = config::kRunRecordFileName;
inline constexpr const char* kMetricsFileName = "metrics.jsonl";
inline constexpr const char* kLatestName = "latest";
inline constexpr const char* kConfigFileName = config::kRunConfigFileName;

struct RunFolderRequest {
  std::string config_name;
  std::string run_dir = {};         // --run-dir; "" = choose one
  std::string run_file = {};        // -o/--output; "" = <run folder>/run.json
  bool write_run_file = true;       // false: no run file at all
  std::string checkpoint_dir = {};  // --checkpoint-dir; "" = the run folder
  bool force = false;               // --force: write into a folder that holds a run
  std::string command = {};         // the command line, for the folder's lock
};

struct RunPaths {
  std::filesystem::path dir;  // the run folder: metrics.jsonl, and checkpoints by default
  std::string run_file;       // "" when none is written
  std::filesystem::path checkpoint_dir;
  bool stamped = false;  // poprun made `dir` under runs/<name>/: `latest` follows it
};

// runs/<config name> ("run" for a config without a name).
std::filesystem::path runs_folder(const std::string& config_name);

// "20261125-174501" (UTC, so names sort in time order whatever the time zone or DST).
std::string run_stamp(std::time_t when);

// The run folder as the process that writes the run holds it: its paths, its lock
// (runner/run_lock.h), and the folders it created. Until keep() (the run's set-up
// succeeded), destroying it removes the folders it created that are still empty, so a
// refused start leaves the file system as it found it; the lock is released either way.
class RunFolder {
 public:
  RunFolder() = default;
  RunFolder(RunFolder&& other) noexcept;
  RunFolder& operator=(RunFolder&&) = delete;
  ~RunFolder();

  RunPaths paths;
  void keep() { kept_ = true; }
  // What destroying it does, now: the lock released and, unless kept, the folders it
  // created removed while empty (a set-up stopped by a signal ends without destructors).
  void abandon() noexcept;

 private:
  friend RunFolder make_run_paths(const RunFolderRequest& request, std::time_t now);
  RunLock lock_;
  RunLock checkpoint_lock_;  // the checkpoint folder's, when it is another folder
  std::vector<std::filesystem::path> created_;  // in the order created
  bool kept_ = false;
};

// Decides the run's folders, creates them and locks the run folder:
// - --run-dir DIR: DIR (the run file DIR/run.json unless -o names another);
// - else -o FILE: FILE's folder, as before run folders existed (checkpoints and
//   metrics.jsonl beside the run file);
// - else a new runs/<config name>/<stamp>/, with "-2", "-3", ... after the stamp when
//   that folder exists (created with mkdir, so two runs starting in the same second
//   get two folders).
// The checkpoint folder, when it is another folder, is locked too. A folder another run
// holds, as its run folder or its checkpoint folder, is refused (InputRefused, exit 2,
// naming the holder).
// Unless `force`, a run file that exists, or a run folder or checkpoint folder that holds
// metrics.jsonl or checkpoints, is refused: AgreedError, exit code 2, naming --force.
RunFolder make_run_paths(const RunFolderRequest& request, std::time_t now);

// What --force writes over: the earlier run's run file, metrics.jsonl and config.yaml in
// the run folder and every checkpoint-step<N>.safetensors in the checkpoint folder, so
// that no checkpoint of it is left for a later --resume to take. `keep`, the checkpoint
// this run resumed from (its config matches), stays. Returns what it removed.
std::vector<std::string> remove_earlier_run(const RunPaths& paths, const std::string& keep = "");

// Points runs/<name>/latest at a stamped folder (a relative symbolic link, replaced
// atomically through rename). Only a link poprun made (to a folder beside it) is
// replaced: a file, a folder or another link there (one to a folder beside it that holds
// no run included) is left as it is. Returns "" or why
// it was not pointed (the run goes on).
std::string point_latest(const RunPaths& paths);

// What --resume names: "latest" (the newest checkpoint in runs/<name>/latest), a run
// folder (its newest checkpoint-step<N>.safetensors) or a checkpoint file. `run_dir` is
// the folder of the earlier run, whose run.json holds the history ("" when none).
struct ResumePoint {
  std::string checkpoint;
  std::string run_dir;
};
// Throws popkit::Error naming what is missing and what to give instead.
ResumePoint resolve_resume(const std::string& resume, const std::string& config_name);

// The newest checkpoint-step<N>.safetensors in `dir` (the largest N); nullopt when none.
std::optional<std::filesystem::path> newest_checkpoint(const std::filesystem::path& dir);

// The earlier run's losses and step times up to the checkpoint's step, from the run
// file in its folder: steps first_step+1 .. step. When that file is missing or does not
// reach back (a bare checkpoint, or a run killed before it wrote its run file), the
// history is empty, first_step is the checkpoint's step and `note` says why.
struct RunHistory {
  std::vector<double> loss;
  std::vector<double> step_seconds;
  std::vector<reports::Evaluation> evaluations;  // up to the checkpoint's step
  std::int64_t first_step = 0;
  std::string run_file;  // the file read; "" when none
  std::string note;
};
RunHistory earlier_history(const std::string& run_dir, std::int64_t step);

// A command line as a shell takes it back, on one line: each argument that holds
// anything but letters, digits and -_./=:,+@% in single quotes ("poprun train 'my
// config.yaml'"), or, holding a control character, as $'...' with \xNN escapes.
std::string command_line_text(const std::vector<std::string>& arguments);

// RunPaths and ResumePoint as JSON: rank 0 decides them and sends them to every rank.
void to_json(nlohmann::json& j, const RunPaths& paths);
void from_json(const nlohmann::json& j, RunPaths& paths);
void to_json(nlohmann::json& j, const ResumePoint& resume);
void from_json(const nlohmann::json& j, ResumePoint& resume);

}  // namespace popkit::runner
