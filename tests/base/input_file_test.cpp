// Input files: only regular files are read, and nothing blocks on a FIFO or a device.
#include "base/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "base/output_file.h"

namespace fs = std::filesystem;
using popkit::Error;
using popkit::input_file_problem;
using popkit::open_input_file;
using popkit::output_path_problem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("popkit-input-file-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string message_of(const std::string& path, const std::string& hint = "") {
  try {
    open_input_file(path, hint);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(input_file)

BOOST_AUTO_TEST_CASE(a_regular_file_is_read_whole) {
  TempDir dir;
  const std::string path = (dir.path / "a.txt").string();
  std::ofstream(path) << "hello";
  popkit::InputFile file = open_input_file(path);
  BOOST_TEST(file.size() == 5u);
  BOOST_TEST(file.read_all(5) == "hello");
  BOOST_TEST(input_file_problem(path).empty());
}

BOOST_AUTO_TEST_CASE(a_file_over_the_limit_is_refused_before_reading) {
  TempDir dir;
  const std::string path = (dir.path / "big.json").string();
  std::ofstream(path) << "0123456789";
  popkit::InputFile file = open_input_file(path);
  BOOST_CHECK_EXCEPTION(file.read_all(9, "run file"), Error, [&](const Error& e) {
    return std::string(e.what()) == path + ": 10 bytes, more than the 9 a run file may have";
  });
}

BOOST_AUTO_TEST_CASE(what_is_not_a_regular_file_is_named) {
  TempDir dir;
  const std::string fifo = (dir.path / "fifo").string();
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A FIFO without a writer would block a plain open: this returns at once.
  BOOST_TEST(message_of(fifo) == fifo + ": is not a regular file (a FIFO)");
  BOOST_TEST(message_of("/dev/zero") == "/dev/zero: is not a regular file (a character device)");
  BOOST_TEST(message_of(dir.path.string(), "give the path of a run file") ==
             dir.path.string() + ": is a directory; give the path of a run file");
  BOOST_TEST(message_of((dir.path / "nope").string(), "hint") ==
             (dir.path / "nope").string() + ": no such file");
  BOOST_TEST(input_file_problem("/dev/null") == "is not a regular file (a character device)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(output_file)

using popkit::AtomicFile;
using popkit::TemporaryName;

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

BOOST_AUTO_TEST_CASE(committed_replaces_the_file_whole) {
  TempDir dir;
  const std::string path = (dir.path / "run.json").string();
  std::ofstream(path) << "old";
  {
    AtomicFile out(path, TemporaryName::kSuffix);
    BOOST_TEST(out.temporary() == path + ".tmp");
    out.write("new ", 4);
    BOOST_TEST(contents(path) == "old");  // the target is untouched until commit
    out.write("text", 4);
    out.commit();
  }
  BOOST_TEST(contents(path) == "new text");
  BOOST_TEST(!fs::exists(path + ".tmp"));
}

BOOST_AUTO_TEST_CASE(abandoned_leaves_the_old_file_and_no_temporary) {
  TempDir dir;
  const std::string path = (dir.path / "checkpoint-step1.safetensors").string();
  std::ofstream(path) << "old";
  const std::string tmp = popkit::temporary_path(path, TemporaryName::kHiddenPerProcess);
  BOOST_TEST(
      tmp ==
      (dir.path / (".checkpoint-step1.safetensors.tmp-" + std::to_string(::getpid()))).string());
  {
    AtomicFile out(path, TemporaryName::kHiddenPerProcess);
    out.write("half", 4);
    BOOST_TEST(fs::exists(tmp));
  }
  BOOST_TEST(contents(path) == "old");
  BOOST_TEST(!fs::exists(tmp));
}

BOOST_AUTO_TEST_CASE(a_failed_rename_says_why_and_removes_the_temporary) {
  TempDir dir;
  const fs::path target = dir.path / "taken";
  fs::create_directories(target / "inside");  // rename(2) cannot replace a non-empty folder
  AtomicFile out(target.string(), TemporaryName::kSuffix);
  out.write("x", 1);
  BOOST_CHECK_EXCEPTION(out.commit(), Error, [&](const Error& e) {
    return std::string(e.what()) ==
           target.string() + ": cannot move the written file into place: Is a directory";
  });
  BOOST_TEST(!fs::exists(target.string() + ".tmp"));
}

// The path the caller gave is named, never the temporary (no name a user knows).
BOOST_AUTO_TEST_CASE(a_failed_open_names_the_path_not_the_temporary) {
  TempDir dir;
  const std::string path = (dir.path / "no" / "such" / "x.yaml").string();
  BOOST_CHECK_EXCEPTION(AtomicFile(path, TemporaryName::kHiddenPerProcess), Error,
                        [&](const Error& e) {
                          return std::string(e.what()) ==
                                 path + ": cannot open for writing: No such file or directory";
                        });
}

BOOST_AUTO_TEST_CASE(an_output_path_in_a_missing_folder_is_found_before_writing) {
  TempDir dir;
  const std::string folder = (dir.path / "no" / "such").string();
  BOOST_TEST(output_path_problem(folder + "/x.yaml") ==
             "'" + folder + "/x.yaml': the folder '" + folder + "' does not exist");
  BOOST_TEST(output_path_problem(dir.path.string()) ==
             "'" + dir.path.string() + "' is a folder, not a file name");
  BOOST_TEST(output_path_problem((dir.path / "x.yaml").string()).empty());
  std::ofstream((dir.path / "file").string()) << "x";
  BOOST_TEST(output_path_problem((dir.path / "file" / "x.yaml").string()) ==
             "'" + (dir.path / "file" / "x.yaml").string() + "': '" + (dir.path / "file").string() +
                 "' is not a folder");
}

BOOST_AUTO_TEST_CASE(a_link_at_the_temporary_is_not_written_through) {
  TempDir dir;
  const fs::path victim = dir.path / "victim";
  std::ofstream(victim) << "keep";
  const fs::path path = dir.path / "run.json";
  fs::create_symlink(victim, path.string() + ".tmp");
  BOOST_CHECK_THROW(AtomicFile(path.string(), TemporaryName::kSuffix), Error);
  BOOST_TEST(contents(victim) == "keep");
}

BOOST_AUTO_TEST_SUITE_END()
