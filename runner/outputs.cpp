// Output paths checked before the first step; stale temporaries removed. See outputs.h.
#include "runner/outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "base/error.h"
#include "base/output_file.h"

namespace popkit::runner {
namespace {

namespace fs = std::filesystem;

// Why rename(2) could not put a file at `path`: "" when nothing is there or a regular
// file is (it is replaced). Follows symbolic links, so a link to a directory or a
// device is refused too; with `follow` false a link itself is in the way.
std::string in_the_way(const fs::path& path, bool follow = true) {
  struct stat st {};
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return "";
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (S_ISFIFO(st.st_mode)) return "is not a regular file (a FIFO)";
  if (S_ISCHR(st.st_mode)) return "is not a regular file (a character device)";
  if (S_ISBLK(st.st_mode)) return "is not a regular file (a block device)";
  if (S_ISSOCK(st.st_mode)) return "is not a regular file (a socket)";
  return "is not a regular file";
}

// "123" -> 123; nullopt for anything but digits (at most 18, so no overflow).
std::optional<std::int64_t> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// ".NAME.tmp-4711" -> 4711 when NAME passes `is_target` (temporary_path(kHiddenPerProcess)
// of NAME, as engine::write_safetensors and reports::write_run_file write it).
template <typename Target>
std::optional<std::int64_t> temporary_pid(const std::string& name, Target&& is_target) {
  static const std::string kTmp = ".tmp-";
  const auto tmp = name.rfind(kTmp);
  if (!name.starts_with(".") || tmp == std::string::npos) return std::nullopt;
  if (!is_target(name.substr(1, tmp - 1))) return std::nullopt;
  return parse_count(name.substr(tmp + kTmp.size()));
}

// A temporary is stale when the process that wrote it is gone. Our own PID counts as
// gone: at the start nothing of ours is being written, so it is an earlier process's
// that had the same PID. A live PID (kill(pid, 0) succeeds, or EPERM: another user's)
// keeps its file, although two runs must not share a checkpoint folder: removing the
// temporary of a run that does would make its rename fail and lose that checkpoint,
// while keeping one whose PID was reused costs only disk space until a later run.
bool process_gone(std::int64_t pid) {
  if (pid == ::getpid()) return true;
  if (pid <= 0 || pid > std::int64_t{1} << 30) return pid > 0;  // no such PID on Linux
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

bool is_regular_not_link(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::optional<std::int64_t> checkpoint_step(const std::string& name) {
  static const std::string kPrefix = "checkpoint-step";
  static const std::string kSuffix = ".safetensors";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix))
    return std::nullopt;
  const std::string digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;  // not a name poprun writes
  return parse_count(digits);
}

void ensure_writable_dir(const fs::path& dir, const std::string& what) {
  const fs::path d = dir.empty() ? fs::path(".") : dir;
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec) throw Error("{}: cannot create the {} folder: {}", d.string(), what, ec.message());
  const std::string probe = (d / (".poprun-write-test-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("{}: cannot write to the {} folder: {}", d.string(), what, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_run_file_path(const std::string& path) {
  const fs::path p(path);
  if (p.filename().empty() || p.filename() == "." || p.filename() == "..")
    throw Error("{}: names a folder, not a run file: give a file path such as {}", path,
                (p / "run.json").lexically_normal().string());
  if (const std::string why = in_the_way(p); why == "is a directory")
    throw Error("{}: is a directory, not a run file: give a file path such as {}", path,
                (p / "run.json").string());
  else if (!why.empty())
    throw Error(
        "{}: {}: the run file replaces what is at its path, so that must be a regular "
        "file or nothing",
        path, why);
  // The temporary is opened without following links (reports::write_run_file).
  const std::string tmp = temporary_path(path, TemporaryName::kHiddenPerProcess);
  if (const std::string why = in_the_way(tmp, /*follow=*/false); !why.empty())
    throw Error("{}: {}, but the run file is written there first: remove it", tmp, why);
  ensure_writable_dir(p.parent_path(), "run file");
}

void check_checkpoint_paths(const fs::path& dir, std::int64_t first_step) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
    const auto step = checkpoint_step(entry.path().filename().string());
    if (!step || *step < first_step) continue;
    if (const std::string why = in_the_way(entry.path()); !why.empty())
      throw Error(
          "{}: {}, but this run may write its checkpoint of step {} there: remove it or "
          "choose another --checkpoint-dir",
          entry.path().string(), why, *step);
  }
  if (ec) throw Error("{}: cannot list the checkpoint folder: {}", dir.string(), ec.message());
}

std::vector<std::string> remove_stale_temporaries(const std::optional<fs::path>& checkpoint_dir,
                                                  const std::string& run_file) {
  std::vector<std::string> removed;
  // Removed after the listing, which must not see the folder change under it.
  const auto remove_stale = [&](const fs::path& dir, const auto& is_target) {
    std::error_code ec;
    std::vector<fs::path> stale;
    for (const auto& entry : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
      const auto pid = temporary_pid(entry.path().filename().string(), is_target);
      if (pid && process_gone(*pid)) stale.push_back(entry.path());
    }
    for (const auto& path : stale)
      if (is_regular_not_link(path) && ::unlink(path.c_str()) == 0)
        removed.push_back(path.string());
  };
  if (!run_file.empty()) {
    const fs::path file(run_file);
    remove_stale(file.parent_path(),
                 [name = file.filename().string()](const std::string& n) { return n == name; });
  }
  if (checkpoint_dir)
    remove_stale(*checkpoint_dir,
                 [](const std::string& n) { return checkpoint_step(n).has_value(); });
  return removed;
}

}  // namespace popkit::runner
