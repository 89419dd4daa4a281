// Run folders (runner/run_dir.h): a new stamped folder per run with `latest` pointing at
// it, runs in the same second apart, nothing overwritten without force, --resume's three
// forms, and metrics.jsonl: one line per step, its losses those of the run file.
#include "runner/run_dir.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "helpers.h"
#include "runner/agreement.h"
#include "runner/resolved_config.h"

using namespace popkit;
using namespace popkit::runner;
using namespace popkit::runner::testing;

namespace {

// Runs the test in `dir`, where runs/<name>/ is made, and goes back after.
struct InFolder {
  fs::path before = fs::current_path();
  explicit InFolder(const fs::path& dir) { fs::current_path(dir); }
  ~InFolder() { fs::current_path(before); }
};

std::string error_of(const std::function<void()>& f, int* exit_code = nullptr) {
  try {
    f();
  } catch (const AgreedError& e) {
    if (exit_code) *exit_code = e.exit_code();
    return e.what();
  } catch (const std::exception& e) {
    if (exit_code) *exit_code = 1;
    return e.what();
  }
  return "";
}

TrainResult train_in(const config::Config& c, TrainOptions o) {
  o.n_threads = 2;
  std::ostringstream log;
  Progress progress(log, ProgressStyle::kNone);
  return train(c, o, progress);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_folders)

BOOST_AUTO_TEST_CASE(stamp_sorts_and_same_second_runs_get_their_own_folder) {
  BOOST_TEST(run_stamp(1795628701) == "20261125-174501");  // UTC
  const auto dir = scratch("stamps");
  InFolder here(dir);
  RunFolderRequest want;
  want.config_name = "tiny";
  RunFolder folder_a = make_run_paths(want, 1795628701);
  RunFolder folder_b = make_run_paths(want, 1795628701);
  std::optional<RunFolder> folder_c(make_run_paths(want, 1795628701));
  folder_a.keep();
  folder_b.keep();
  const RunPaths& a = folder_a.paths;
  const RunPaths& b = folder_b.paths;
  const RunPaths c = folder_c->paths;
  BOOST_TEST(a.dir == fs::path("runs/tiny/20261125-174501"));
  BOOST_TEST(b.dir == fs::path("runs/tiny/20261125-174501-2"));
  BOOST_TEST(c.dir == fs::path("runs/tiny/20261125-174501-3"));
  BOOST_TEST(a.stamped);
  BOOST_TEST(a.run_file == "runs/tiny/20261125-174501/run.json");
  BOOST_TEST(a.checkpoint_dir == a.dir);
  BOOST_TEST(fs::is_directory(c.dir));
  BOOST_TEST(point_latest(b) == "");
  BOOST_TEST(fs::read_symlink("runs/tiny/latest") == fs::path("20261125-174501-2"));
  BOOST_TEST(point_latest(a) == "");  // replaced, not added to
  BOOST_TEST(fs::read_symlink("runs/tiny/latest") == fs::path("20261125-174501"));
  folder_c.reset();  // not kept: a run whose set-up failed leaves no folder
  BOOST_TEST(!fs::exists(c.dir));
}

// `latest` is poprun's link: what a user keeps at that name is never replaced.
BOOST_AUTO_TEST_CASE(latest_replaces_only_its_own_link) {
  const auto dir = scratch("latest_own");
  InFolder here(dir);
  RunFolderRequest want;
  want.config_name = "tiny";
  RunFolder run = make_run_paths(want, 1795628701);
  run.keep();
  std::ofstream("runs/tiny/latest") << "my notes\n";
  BOOST_TEST(point_latest(run.paths) ==
             "runs/tiny/latest is not a symbolic link, so it was left as it is, not pointed at "
             "20261125-174501");
  BOOST_TEST((file_bytes("runs/tiny/latest") ==
              std::vector<char>{'m', 'y', ' ', 'n', 'o', 't', 'e', 's', '\n'}));
  fs::remove("runs/tiny/latest");
  fs::create_directory_symlink("/tmp", "runs/tiny/latest");
  BOOST_TEST(point_latest(run.paths).starts_with(
      "runs/tiny/latest is a link to /tmp, not to a run beside it, so it was left as it is"));
  BOOST_TEST(fs::read_symlink("runs/tiny/latest") == fs::path("/tmp"));
  // A link to a folder beside it that holds no run is a user's too.
  fs::remove("runs/tiny/latest");
  fs::create_directory("runs/tiny/notes");
  fs::create_directory_symlink("notes", "runs/tiny/latest");
  BOOST_TEST(point_latest(run.paths) ==
             "runs/tiny/latest is a link to notes, a folder that holds no run, so it was left as "
             "it is, not pointed at 20261125-174501");
  BOOST_TEST(fs::read_symlink("runs/tiny/latest") == fs::path("notes"));
  // A link to a removed run, or to a run, is poprun's.
  fs::remove("runs/tiny/latest");
  fs::create_directory_symlink("20200101-000000", "runs/tiny/latest");
  BOOST_TEST(point_latest(run.paths) == "");
  BOOST_TEST(fs::read_symlink("runs/tiny/latest") == fs::path("20261125-174501"));
}

// A run folder is one run's while it runs: a second is refused at once, naming the
// holder; once the first ends (or dies), the folder is free.
BOOST_AUTO_TEST_CASE(a_folder_in_use_is_refused_naming_its_holder) {
  const auto dir = scratch("lock");
  InFolder here(dir);
  RunFolderRequest want;
  want.config_name = "tiny";
  want.run_dir = "shared";
  want.command = "poprun train tiny.yaml --run-dir shared";
  std::optional<RunFolder> first(make_run_paths(want, 0));
  BOOST_TEST(fs::exists("shared/.poprun.lock"));
  std::string refused;
  try {
    make_run_paths(want, 0);
  } catch (const InputRefused& e) {
    refused = e.what();
  }
  BOOST_TEST(refused.starts_with(
                 fmt::format("shared is in use by another run: pid {} on host ", ::getpid())),
             refused);
  BOOST_TEST(refused.find(" UTC: poprun train tiny.yaml --run-dir shared; two runs in one folder "
                          "would mix their checkpoints and metrics") != std::string::npos,
             refused);
  // Nor may another run write its checkpoints there, or take the first run's checkpoint
  // folder for its run folder.
  RunFolderRequest other;
  other.config_name = "tiny";
  other.run_dir = "other";
  other.checkpoint_dir = "shared";
  BOOST_TEST(error_of([&] {
               make_run_paths(other, 0);
             }).starts_with(fmt::format("shared is in use by another run: pid {}", ::getpid())));
  RunFolderRequest with_checkpoints = want;
  with_checkpoints.run_dir = "third";
  with_checkpoints.checkpoint_dir = "kept";
  std::optional<RunFolder> third(make_run_paths(with_checkpoints, 0));
  BOOST_TEST(fs::exists("kept/.poprun.lock"));
  other.run_dir = "kept";
  other.checkpoint_dir.clear();
  BOOST_TEST(error_of([&] {
               make_run_paths(other, 0);
             }).starts_with(fmt::format("kept is in use by another run: pid {}", ::getpid())));
  other.run_dir.clear();
  other.checkpoint_dir = "kept";  // a stamped run folder, the checkpoints in use
  BOOST_TEST(error_of([&] { make_run_paths(other, 0); }).starts_with("kept is in use"));
  third.reset();
  BOOST_TEST(!fs::exists("kept/.poprun.lock"));
  first->keep();
  first.reset();
  BOOST_TEST(!fs::exists("shared/.poprun.lock"));  // released and removed
  BOOST_TEST(fs::is_directory("shared"));          // kept: its run started
  RunFolder second = make_run_paths(want, 0);
  BOOST_TEST(second.paths.dir == fs::path("shared"));
}

// A --run-dir that does not exist is made for the run; a run that fails before its first
// step (here: its data is missing) leaves none of the folders it made, stamped or not.
BOOST_AUTO_TEST_CASE(a_refused_start_leaves_no_folder) {
  const auto dir = scratch("refused");
  InFolder here(dir);
  const std::string missing = (dir / "no-such.idx").string();
  const config::Config c =
      tiny_config({"data.dataset=idx", "model.input_shape=[28, 28]", "data.train_images=" + missing,
                   "data.train_labels=" + missing, "data.test_images=" + missing,
                   "data.test_labels=" + missing});
  TrainOptions o;
  o.steps = 2;
  o.run_dir = "new/deeper";
  BOOST_TEST(error_of([&] { train_in(c, o); }).find(missing) != std::string::npos);
  BOOST_TEST(!fs::exists("new"));
  o.run_dir.clear();
  BOOST_TEST(error_of([&] { train_in(c, o); }).find(missing) != std::string::npos);
  BOOST_TEST(!fs::exists("runs"));
}

// --force writes over an earlier run: none of its checkpoints is left for a later
// --resume to take (a resume of the folder continues the run that --force wrote).
BOOST_AUTO_TEST_CASE(force_leaves_no_checkpoint_of_the_earlier_run) {
  const auto dir = scratch("force");
  InFolder here(dir);
  const config::Config c = tiny_config();
  TrainOptions o;
  o.steps = 6;
  o.checkpoint_every = 2;
  o.run_dir = "mine";
  train_in(c, o);
  BOOST_TEST(fs::exists("mine/checkpoint-step6.safetensors"));
  o.steps = 3;
  o.checkpoint_every = 0;
  o.force = true;
  const TrainResult forced = train_in(c, o);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator("mine"))
    left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  BOOST_TEST(left == (std::vector<std::string>{"checkpoint-step3.safetensors", "config.yaml",
                                               "metrics.jsonl", "run.json"}),
             boost::test_tools::per_element());
  BOOST_TEST(resolve_resume("mine", "tiny").checkpoint == forced.checkpoint);
  // Resumed from its own folder with --force, the run keeps the checkpoint it resumed
  // from (of its own config) and removes the rest of the earlier run.
  o.steps = 5;
  o.checkpoint_every = 1;
  o.resume = "mine/checkpoint-step3.safetensors";
  const TrainResult resumed = train_in(c, o);
  BOOST_TEST(resumed.first_step == 3);
  BOOST_TEST(fs::exists("mine/checkpoint-step3.safetensors"));
  BOOST_TEST(fs::exists("mine/checkpoint-step5.safetensors"));
}

BOOST_AUTO_TEST_CASE(an_earlier_run_is_not_overwritten_without_force) {
  const auto dir = scratch("no_overwrite");
  InFolder here(dir);
  const config::Config c = tiny_config();
  TrainOptions o;
  o.steps = 2;
  o.run_dir = "mine";
  const TrainResult first = train_in(c, o);
  BOOST_TEST(first.run_dir == "mine");
  BOOST_TEST(first.run_file == "mine/run.json");
  BOOST_TEST(first.checkpoint == "mine/checkpoint-step2.safetensors");
  BOOST_TEST(!fs::exists("runs"));  // --run-dir: no stamped folder, no latest
  int code = 0;
  BOOST_TEST(error_of([&] { train_in(c, o); }, &code) ==
             "--run-dir mine holds an earlier run (run.json, metrics.jsonl, 1 checkpoint); "
             "poprun does not overwrite a run: give another --run-dir, leave out --run-dir and "
             "-o for a new folder under runs/tiny/, or give --force to write over it");
  BOOST_TEST(code == 2);
  // -o FILE: the run folder is the file's folder, as before run folders.
  TrainOptions by_file;
  by_file.steps = 2;
  by_file.run_file = "mine/other.json";
  BOOST_TEST(
      error_of([&] { train_in(c, by_file); }, &code)
          .starts_with(
              "mine (the folder of -o mine/other.json) holds an earlier run (metrics.jsonl, 1 "
              "checkpoint)"));
  BOOST_TEST(code == 2);
  o.force = true;
  const TrainResult again = train_in(c, o);
  BOOST_TEST(again.steps == 2);
  // Checkpoints of another run in --checkpoint-dir are refused too.
  TrainOptions shared;
  shared.steps = 2;
  shared.checkpoint_dir = "mine";
  BOOST_TEST(error_of([&] { train_in(c, shared); }, &code)
                 .starts_with("--checkpoint-dir mine holds checkpoints of an earlier run"));
  BOOST_TEST(code == 2);
  BOOST_TEST(!fs::exists("runs"));  // the stamped folder it made is gone again, and runs/
}

BOOST_AUTO_TEST_CASE(resume_latest_a_run_folder_or_a_checkpoint) {
  const auto dir = scratch("resume_forms");
  InFolder here(dir);
  const config::Config c = tiny_config();
  BOOST_TEST(
      error_of([&] { resolve_resume("latest", "tiny"); })
          .starts_with(
              "--resume latest: runs/tiny/latest does not exist: no run of 'tiny' was started from "
              "this folder"));
  fs::create_directories("runs/tiny");
  std::ofstream("runs/tiny/latest") << "my notes\n";
  BOOST_TEST(error_of([&] { resolve_resume("latest", "tiny"); })
                 .starts_with("--resume latest: runs/tiny/latest is not poprun's link to the "
                              "latest run of 'tiny' but a file"));
  // Refused input, as a path that is not there: exit 2, before any folder is made.
  TrainOptions refused;
  refused.steps = 2;
  refused.resume = "latest";
  int code = 0;
  BOOST_TEST(error_of([&] { train_in(c, refused); }, &code)
                 .starts_with("--resume latest: runs/tiny/latest is not poprun's link"));
  BOOST_TEST(code == 2);
  fs::create_directories("empty");
  refused.resume = "empty";
  BOOST_TEST(error_of([&] { train_in(c, refused); }, &code)
                 .starts_with("--resume empty: empty holds no checkpoint"));
  BOOST_TEST(code == 2);
  fs::remove_all("empty");
  fs::remove_all("runs");
  TrainOptions o;
  o.steps = 4;
  o.checkpoint_every = 2;
  const TrainResult first = train_in(c, o);
  BOOST_TEST(fs::path(first.run_dir).parent_path() == fs::path("runs/tiny"));
  const ResumePoint latest = resolve_resume("latest", "tiny");
  BOOST_TEST(latest.checkpoint == first.checkpoint);  // the newest: step 4, not 2
  BOOST_TEST(latest.run_dir == first.run_dir);
  const ResumePoint by_dir = resolve_resume(first.run_dir, "tiny");
  BOOST_TEST(by_dir.checkpoint == first.checkpoint);
  const std::string step2 = (fs::path(first.run_dir) / "checkpoint-step2.safetensors").string();
  const ResumePoint by_file = resolve_resume(step2, "tiny");
  BOOST_TEST(by_file.checkpoint == step2);
  BOOST_TEST(by_file.run_dir == first.run_dir);
  fs::create_directory("empty");
  BOOST_TEST(error_of([&] {
               resolve_resume("empty", "tiny");
             }).starts_with("--resume empty: empty holds no checkpoint"));

  // A resumed run writes a new folder, leaves the old one as it was, and moves latest.
  const auto old_files = file_bytes(fs::path(first.run_dir) / "run.json");
  TrainOptions more;
  more.steps = 6;
  more.resume = "latest";
  const TrainResult second = train_in(c, more);
  BOOST_TEST(second.run_dir != first.run_dir);
  BOOST_TEST(second.first_step == 4);
  BOOST_TEST((file_bytes(fs::path(first.run_dir) / "run.json") == old_files));
  BOOST_TEST(fs::read_symlink("runs/tiny/latest") == fs::path(second.run_dir).filename());
  BOOST_TEST(second.record.loss.size() == 6u);
  BOOST_TEST(second.record.resumed_from->checkpoint == first.checkpoint);
  // From a mid-run checkpoint: the history stops at its step.
  TrainOptions from2;
  from2.steps = 6;
  from2.resume = step2;
  const TrainResult third = train_in(c, from2);
  BOOST_TEST(third.record.loss.size() == 6u);
  BOOST_TEST((std::vector<double>(third.record.loss.begin(), third.record.loss.begin() + 2) ==
              std::vector<double>(first.record.loss.begin(), first.record.loss.begin() + 2)));
  BOOST_TEST(third.record.loss == second.record.loss);  // the same run, resumed elsewhere
}

// A run folder's config.yaml is a config: it loads again as the same config (the same
// hash), for every example, and a profile file given by a relative path is found from
// the run folder, wherever that is.
BOOST_AUTO_TEST_CASE(config_yaml_loads_back_as_the_same_config) {
  std::vector<fs::path> configs;
  for (const char* dir : {"/examples", "/tests/train/data"})
    for (const auto& entry : fs::directory_iterator(std::string(POPKIT_SOURCE_DIR) + dir))
      if (entry.path().extension() == ".yaml") configs.push_back(entry.path());
  BOOST_TEST(configs.size() >= 9u);
  for (const fs::path& path : configs) {
    BOOST_TEST_CONTEXT(path.filename()) {
      const auto original = config::load_config_file(path.string());
      BOOST_REQUIRE(original.config);
      const std::string yaml = resolved_config_yaml(*original.config, "poprun train x.yaml");
      const auto again = config::load_config_string(yaml, "runs/x/config.yaml");
      BOOST_REQUIRE(again.config);
      BOOST_TEST(config_hash(*again.config) == config_hash(*original.config));
      BOOST_TEST(yaml.find("# config hash: " + config_hash(*original.config) + "\n") !=
                 std::string::npos);
    }
  }
  const auto dir = scratch("config_yaml");
  InFolder here(dir);
  fs::create_directories("profiles");
  fs::copy_file(std::string(POPKIT_SOURCE_DIR) + "/share/profiles/cpu.yaml", "profiles/mine.yaml");
  const config::Config c = tiny_config({"device.profile=profiles/mine.yaml"});
  fs::create_directories("deep/run");
  std::ofstream("deep/run/config.yaml") << resolved_config_yaml(c, "poprun train 'a b.yaml'");
  const auto loaded = config::load_config_file("deep/run/config.yaml");
  BOOST_REQUIRE(loaded.config);
  BOOST_TEST(loaded.config->device.resolved->source == (dir / "profiles/mine.yaml").string());
  // Every tool takes the run folder for its config.yaml.
  const auto by_folder = config::load_config_file("deep/run");
  BOOST_REQUIRE(by_folder.config);
  BOOST_TEST(config_hash(*by_folder.config) == config_hash(*loaded.config));
  BOOST_REQUIRE(!config::load_config_file("deep").ok());
  BOOST_TEST(config::load_config_file("deep").diagnostics.at(0).message ==
             "is a directory; give the path of a YAML config file");
  // A run length from the command line is said where the config keeps its own.
  BOOST_TEST(resolved_config_yaml(c, "poprun train x.yaml --steps 5", "--steps 5")
                 .find("\n# run length: --steps 5 from the command line, not the training "
                       "section's; give it again\n") != std::string::npos);
  BOOST_TEST(command_line_text({"poprun", "train", "a b.yaml", "--set", "name=it's", "x\ny"}) ==
             "poprun train 'a b.yaml' --set 'name=it'\\''s' $'x\\x0ay'");
}

BOOST_AUTO_TEST_CASE(metrics_log_has_a_line_per_step_with_the_run_files_losses) {
  const auto dir = scratch("metrics");
  InFolder here(dir);
  const config::Config c = tiny_config();
  TrainOptions o;
  o.steps = 5;
  o.run_dir = "a";
  const TrainResult first = train_in(c, o);
  BOOST_TEST(first.metrics_file == "a/metrics.jsonl");
  const auto lines_of = [](const std::string& path) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  };
  const auto lines = lines_of(first.metrics_file);
  BOOST_REQUIRE(lines.size() == 5u);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    BOOST_TEST(lines[i]["step"] == static_cast<std::int64_t>(i + 1));
    BOOST_TEST(lines[i]["epoch"] == 1);
    BOOST_TEST(lines[i]["loss"].get<double>() == first.record.loss[i]);
    BOOST_TEST(lines[i]["step_seconds"].get<double>() == first.record.step_seconds[i]);
    BOOST_TEST(lines[i]["learning_rate"].get<double>() == c.training.optimizer.lr);
    BOOST_TEST(lines[i]["samples_per_second"].get<double>() > 0.0);
    BOOST_TEST(lines[i]["phase_seconds"].size() == first.record.phases.size());
    BOOST_TEST(lines[i]["phase_seconds"].contains(first.record.phases.front().name));
  }
  // A resumed run's log holds its own steps, numbered on.
  TrainOptions more;
  more.steps = 8;
  more.resume = "a";
  more.run_dir = "b";
  const TrainResult second = train_in(c, more);
  const auto resumed = lines_of(second.metrics_file);
  BOOST_REQUIRE(resumed.size() == 3u);
  BOOST_TEST(resumed.front()["step"] == 6);
  BOOST_TEST(resumed.back()["step"] == 8);
  BOOST_TEST(resumed.back()["loss"].get<double>() == second.record.loss.back());
}

BOOST_AUTO_TEST_SUITE_END()
