// Run folders, --resume's forms and the earlier run's history. See run_dir.h.
#include "runner/run_dir.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <system_error>
#include <utility>

#include "base/error.h"
#include "reports/json_reader.h"
#include "reports/run_record.h"
#include "runner/agreement.h"
#include "runner/outputs.h"

namespace popkit::runner {
namespace {

namespace fs = std::filesystem;

constexpr int kExitInvalid = 2;

bool is_regular(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

std::int64_t count_checkpoints(const fs::path& dir) {
  std::int64_t n = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec))
    if (checkpoint_step(entry.path().filename().string()) && is_regular(entry.path())) ++n;
  return n;
}

// What an earlier run left in the folders this run would write: "run.json,
// metrics.jsonl, 3 checkpoints"; "" when nothing.
std::string earlier_outputs(const RunPaths& p) {
  std::vector<std::string> found;
  if (!p.run_file.empty() && is_regular(p.run_file))
    found.push_back(fs::path(p.run_file).filename().string());
  if (is_regular(p.dir / kMetricsFileName)) found.emplace_back(kMetricsFileName);
  if (const std::int64_t n = count_checkpoints(p.checkpoint_dir); n > 0)
    found.push_back(fmt::format(
        "{} checkpoint{}{}", n, n == 1 ? "" : "s",
        p.checkpoint_dir == p.dir ? "" : fmt::format(" in {}", p.checkpoint_dir.string())));
  return fmt::format("{}", fmt::join(found, ", "));
}

// Creates `dir` and the folders above it that are missing, adding each it created to
// `created` (outermost first).
void create_folders(const fs::path& dir, const char* what, std::vector<fs::path>& created) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path d = dir; !d.empty() && !fs::exists(d, ec); d = d.parent_path()) {
    missing.push_back(d);
    if (d == d.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (!fs::create_directory(*it, ec) && ec)
      throw Error("{}: cannot create the {} folder: {}", it->string(), what, ec.message());
    if (!ec) created.push_back(*it);
  }
  if (!fs::is_directory(dir, ec))
    throw Error("{}: cannot create the {} folder: {}", dir.string(), what,
                std::make_error_code(std::errc::not_a_directory).message());
}

// Unless --force: a folder that holds an earlier run's outputs is refused.
void refuse_earlier_run(const RunFolderRequest& request, const RunPaths& p) {
  const std::string found = earlier_outputs(p);
  if (found.empty()) return;
  const bool by_dir = !request.run_dir.empty();
  throw AgreedError(
      fmt::format("{} holds an earlier run ({}); poprun does not overwrite a run: give "
                  "{}, leave out --run-dir and -o for a new folder under {}/, or give "
                  "--force to write over it",
                  by_dir
                      ? fmt::format("--run-dir {}", p.dir.string())
                      : fmt::format("{} (the folder of -o {})", p.dir.string(), request.run_file),
                  found, by_dir ? "another --run-dir" : "-o a file in another folder",
                  runs_folder(request.config_name).string()),
      true, kExitInvalid);
}

// Why `link` is not poprun's `latest`, which it may replace: "" when nothing is there or
// a symbolic link to a name in its own folder (a stamp) is.
std::string not_our_link(const fs::path& link) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(link, ec);
  if (ec || status.type() == fs::file_type::not_found) return "";
  if (status.type() != fs::file_type::symlink)
    return status.type() == fs::file_type::directory ? "is a folder" : "is not a symbolic link";
  const fs::path target = fs::read_symlink(link, ec);
  if (ec || target.empty() || target.has_parent_path() || target == "." || target == "..")
    return fmt::format("is a link to {}, not to a run beside it", target.string());
  // A run's folder holds its lock, config.yaml, run.json or metrics.jsonl from its start;
  // a link to a folder without any is a user's, and a link to nothing, a removed run's.
  const fs::path dir = link.parent_path() / target;
  if (!fs::exists(dir, ec)) return "";
  for (const char* name : {kLockFileName, kConfigFileName, kRunFileName, kMetricsFileName})
    if (fs::exists(dir / name, ec)) return "";
  return fmt::format("is a link to {}, a folder that holds no run", target.string());
}

// Locks the checkpoint folder when it is not the run folder (already locked).
RunLock lock_checkpoint_folder(const RunPaths& p, const std::string& command) {
  std::error_code ec;
  if (fs::equivalent(p.checkpoint_dir, p.dir, ec)) return {};
  return RunLock::acquire(p.checkpoint_dir, command);
}

}  // namespace

fs::path runs_folder(const std::string& config_name) {
  return fs::path("runs") / (config_name.empty() ? "run" : config_name);
}

std::string run_stamp(std::time_t when) {
  std::tm utc{};
  ::gmtime_r(&when, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &utc);
  return text;
}

RunFolder::RunFolder(RunFolder&& other) noexcept
    : paths(std::move(other.paths)),
      lock_(std::move(other.lock_)),
      checkpoint_lock_(std::move(other.checkpoint_lock_)),
      created_(std::exchange(other.created_, {})),
      kept_(std::exchange(other.kept_, true)) {}

RunFolder::~RunFolder() {
  abandon();
}

void RunFolder::abandon() noexcept {
  checkpoint_lock_.release();
  lock_.release();
  if (kept_) return;
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    if (fs::is_empty(*it, ec) && !ec) fs::remove(*it, ec);
}

RunFolder make_run_paths(const RunFolderRequest& request, std::time_t now) {
  RunFolder folder;
  RunPaths& p = folder.paths;
  if (!request.run_dir.empty()) {
    p.dir = request.run_dir;
  } else if (!request.run_file.empty()) {
    p.dir = fs::path(request.run_file).parent_path();
    if (p.dir.empty()) p.dir = ".";
  }
  if (request.write_run_file)
    p.run_file = !request.run_file.empty() ? request.run_file
                 : !p.dir.empty()          ? (p.dir / kRunFileName).string()
                                           : std::string();
  p.checkpoint_dir = request.checkpoint_dir;
  if (!p.dir.empty()) {
    if (p.checkpoint_dir.empty()) p.checkpoint_dir = p.dir;
    create_folders(p.dir, request.run_dir.empty() ? "run file" : "run", folder.created_);
    // Locked before it is looked at: of two runs started on it at once, one finds it
    // held, not the other's first files.
    folder.lock_ = RunLock::acquire(p.dir, request.command);
    create_folders(p.checkpoint_dir, "checkpoint", folder.created_);
    folder.checkpoint_lock_ = lock_checkpoint_folder(p, request.command);
    if (!request.force) refuse_earlier_run(request, p);
    return folder;
  }
  // A new folder under runs/<name>/: mkdir either creates it or finds it taken.
  const fs::path base = runs_folder(request.config_name);
  create_folders(base, "runs", folder.created_);
  const std::string stamp = run_stamp(now);
  std::error_code ec;
  for (int n = 1; n < 10000; ++n) {
    const fs::path dir = base / (n == 1 ? stamp : fmt::format("{}-{}", stamp, n));
    if (fs::create_directory(dir, ec)) {
      folder.created_.push_back(dir);
      p.dir = dir;
      p.stamped = true;
      folder.lock_ = RunLock::acquire(p.dir, request.command);
      if (request.write_run_file) p.run_file = (dir / kRunFileName).string();
      if (p.checkpoint_dir.empty()) {
        p.checkpoint_dir = dir;
      } else {
        create_folders(p.checkpoint_dir, "checkpoint", folder.created_);
        folder.checkpoint_lock_ = lock_checkpoint_folder(p, request.command);
        if (!request.force && count_checkpoints(p.checkpoint_dir) > 0)
          throw AgreedError(fmt::format("--checkpoint-dir {} holds checkpoints of an earlier run; "
                                        "poprun does not mix runs' checkpoints: give another "
                                        "folder, leave out --checkpoint-dir, or give --force",
                                        p.checkpoint_dir.string()),
                            true, kExitInvalid);
      }
      return folder;
    }
    if (ec) throw Error("{}: cannot create the run folder: {}", dir.string(), ec.message());
  }
  throw Error("{}: 9999 runs started in the second {}: give --run-dir", base.string(), stamp);
}

std::vector<std::string> remove_earlier_run(const RunPaths& p, const std::string& keep) {
  std::vector<fs::path> earlier;
  if (!p.run_file.empty()) earlier.emplace_back(p.run_file);
  earlier.push_back(p.dir / kMetricsFileName);
  earlier.push_back(p.dir / kConfigFileName);
  std::error_code ec;
  const fs::path checkpoints = p.checkpoint_dir.empty() ? fs::path(".") : p.checkpoint_dir;
  for (const auto& entry : fs::directory_iterator(checkpoints, ec)) {
    std::error_code same_ec;
    if (checkpoint_step(entry.path().filename().string()) &&
        (keep.empty() || !fs::equivalent(entry.path(), keep, same_ec)))
      earlier.push_back(entry.path());
  }
  std::vector<std::string> removed;
  for (const fs::path& path : earlier)
    if (is_regular(path) && fs::remove(path, ec)) removed.push_back(path.string());
  return removed;
}

std::string point_latest(const RunPaths& paths) {
  if (!paths.stamped) return "";
  const fs::path base = paths.dir.parent_path();
  const fs::path link = base / kLatestName;
  if (const std::string why = not_our_link(link); !why.empty())
    return fmt::format("{} {}, so it was left as it is, not pointed at {}", link.string(), why,
                       paths.dir.filename().string());
  const fs::path tmp = base / fmt::format(".{}.tmp-{}", kLatestName, ::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_directory_symlink(paths.dir.filename(), tmp, ec);
  if (!ec) fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return fmt::format("{} was not pointed at {}: {}", link.string(), paths.dir.filename().string(),
                       ec.message());
  }
  return "";
}

std::optional<fs::path> newest_checkpoint(const fs::path& dir) {
  std::optional<fs::path> best;
  std::int64_t best_step = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto step = checkpoint_step(entry.path().filename().string());
    if (step && *step > best_step && is_regular(entry.path())) {
      best_step = *step;
      best = entry.path();
    }
  }
  return best;
}

ResumePoint resolve_resume(const std::string& resume, const std::string& config_name) {
  fs::path dir;
  std::string named;  // how the folder was named, for messages
  if (resume == kLatestName) {
    const fs::path link = runs_folder(config_name) / kLatestName;
    std::error_code ec;
    const fs::file_type type = fs::symlink_status(link, ec).type();
    if (type != fs::file_type::not_found && type != fs::file_type::symlink &&
        type != fs::file_type::directory)
      throw InputRefused(
          "--resume latest: {} is not poprun's link to the latest run of '{}' but a file; give "
          "--resume RUN_DIR or --resume CHECKPOINT",
          link.string(), config_name);
    if (!fs::is_symlink(link, ec) && !fs::is_directory(link, ec))
      throw InputRefused(
          "--resume latest: {} does not exist: no run of '{}' was started from this folder "
          "(poprun train writes runs/<config name>/<stamp>/ and points latest at it); give "
          "--resume RUN_DIR or --resume CHECKPOINT",
          link.string(), config_name);
    const fs::path target = fs::is_symlink(link, ec) ? fs::read_symlink(link, ec) : fs::path();
    dir = target.empty() ? link : target.is_absolute() ? target : link.parent_path() / target;
    named = fmt::format("{} (the latest run of '{}')", dir.string(), config_name);
  } else {
    std::error_code ec;
    if (!fs::is_directory(resume, ec)) return {resume, fs::path(resume).parent_path().string()};
    dir = resume;
    named = dir.string();
  }
  const auto newest = newest_checkpoint(dir);
  if (!newest)
    throw InputRefused(
        "--resume {}: {} holds no checkpoint (checkpoint-step<N>.safetensors): its run may "
        "have stopped before writing one, or written them to its --checkpoint-dir; give that "
        "checkpoint's path",
        resume, named);
  return {newest->string(), dir.string()};
}

RunHistory earlier_history(const std::string& run_dir, std::int64_t step) {
  RunHistory h;
  h.first_step = step;
  const fs::path file = fs::path(run_dir.empty() ? "." : run_dir) / kRunFileName;
  if (!is_regular(file)) {
    h.note = fmt::format(
        "no {}: the run file starts at step {}, without the earlier steps' losses and times",
        file.string(), step + 1);
    return h;
  }
  reports::RunRecord earlier;
  try {
    earlier = reports::run_record_from_text(reports::read_input_file(file.string()), file.string());
  } catch (const std::exception& e) {
    h.note = fmt::format("{}; the run file starts at step {}, without the earlier steps", e.what(),
                         step + 1);
    return h;
  }
  // The file must be of the run that wrote the checkpoint: a folder shared by runs (-o
  // files side by side) holds other runs' files.
  const bool wrote_it =
      std::any_of(earlier.checkpoints.begin(), earlier.checkpoints.end(),
                  [&](const reports::CheckpointRecord& c) { return c.step == step; });
  if (!wrote_it) {
    h.note = fmt::format(
        "{} lists no checkpoint of step {}, so it is another run's: the run file starts at step "
        "{}, without the earlier steps",
        file.string(), step, step + 1);
    return h;
  }
  const std::int64_t have = static_cast<std::int64_t>(earlier.loss.size());
  const std::int64_t need = step - earlier.first_step;
  if (need < 0 || have < need || static_cast<std::int64_t>(earlier.step_seconds.size()) < need) {
    h.note = fmt::format(
        "{} holds steps {}..{}, not up to the checkpoint's step {}: the run file starts at step "
        "{}, without the earlier steps",
        file.string(), earlier.first_step + 1, earlier.first_step + have, step, step + 1);
    return h;
  }
  const auto n = static_cast<std::ptrdiff_t>(need);
  h.loss.assign(earlier.loss.begin(), earlier.loss.begin() + n);
  h.step_seconds.assign(earlier.step_seconds.begin(), earlier.step_seconds.begin() + n);
  for (const reports::Evaluation& e : earlier.evaluations)
    if (e.step <= step) h.evaluations.push_back(e);
  h.first_step = earlier.first_step;
  h.run_file = file.string();
  return h;
}

std::string command_line_text(const std::vector<std::string>& arguments) {
  std::string out;
  for (const std::string& arg : arguments) {
    const auto is = [&](auto&& test) { return std::all_of(arg.begin(), arg.end(), test); };
    std::string shown;
    if (!arg.empty() && is([](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
                 std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
        })) {
      shown = arg;
    } else if (is([](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; })) {
      shown = "'";
      for (const char c : arg) shown += c == '\'' ? std::string("'\\''") : std::string(1, c);
      shown += "'";
    } else {  // bash's $'...', so the line stays one line of printable text
      shown = "$'";
      for (const char c : arg) {
        const auto b = static_cast<unsigned char>(c);
        shown += b < 0x20 || b == 0x7f || c == '\'' || c == '\\' ? fmt::format("\\x{:02x}", b)
                                                                 : std::string(1, c);
      }
      shown += "'";
    }
    out += (out.empty() ? "" : " ") + shown;
  }
  return out;
}

void to_json(nlohmann::json& j, const RunPaths& paths) {
  j = {{"dir", paths.dir.string()},
       {"run_file", paths.run_file},
       {"checkpoint_dir", paths.checkpoint_dir.string()},
       {"stamped", paths.stamped}};
}

void from_json(const nlohmann::json& j, RunPaths& paths) {
  paths.dir = j.at("dir").get<std::string>();
  paths.run_file = j.at("run_file").get<std::string>();
  paths.checkpoint_dir = j.at("checkpoint_dir").get<std::string>();
  paths.stamped = j.at("stamped").get<bool>();
}

void to_json(nlohmann::json& j, const ResumePoint& resume) {
  j = {{"checkpoint", resume.checkpoint}, {"run_dir", resume.run_dir}};
}

void from_json(const nlohmann::json& j, ResumePoint& resume) {
  resume.checkpoint = j.at("checkpoint").get<std::string>();
  resume.run_dir = j.at("run_dir").get<std::string>();
}

}  // namespace popkit::runner
