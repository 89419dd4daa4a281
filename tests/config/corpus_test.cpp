// The bad-input corpus: every tests/data/invalid/<case>.expected holds the exact
// diagnostics of loading <case>.yaml (which may be missing, a directory, ...). Paths are
// printed relative to the corpus directory, as `cd tests/data/invalid && popplan
// validate <case>.yaml` prints them.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/config/helpers.h"

using namespace popkit::config;
using namespace popkit::config::test;
namespace fs = std::filesystem;

namespace {

const std::string kCorpus = POPKIT_SOURCE_DIR "/tests/data/invalid";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string relative_to_corpus(std::string text) {
  const std::string prefix = kCorpus + "/";
  for (std::size_t at; (at = text.find(prefix)) != std::string::npos;)
    text.erase(at, prefix.size());
  return text;
}

std::vector<std::string> cases() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    if (entry.path().extension() == ".expected") out.push_back(entry.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(corpus)

BOOST_AUTO_TEST_CASE(every_case_gives_exactly_its_expected_diagnostics) {
  const auto names = cases();
  BOOST_TEST(names.size() >= 40u);
  for (const auto& name : names) {
    BOOST_TEST_CONTEXT("case " << name) {
      const auto result = load_config_file(kCorpus + "/" + name + ".yaml");
      BOOST_TEST(!result.ok());
      BOOST_TEST(has_errors(result.diagnostics));
      const std::string got = relative_to_corpus(text(result));
      BOOST_TEST(got == read(kCorpus + "/" + name + ".expected"));
      for (const auto& d : result.diagnostics) {
        if (d.severity == Severity::kError && d.message != "no such file" &&
            d.message.rfind("is a directory", 0) != 0) {
          BOOST_TEST(d.line > 0, "an error without a line: " << d.message);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(every_yaml_has_an_expected_file) {
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    if (entry.path().extension() != ".yaml") continue;
    fs::path expected = entry.path();
    expected.replace_extension(".expected");
    BOOST_TEST(fs::exists(expected), entry.path().filename() << " has no .expected");
  }
}

BOOST_AUTO_TEST_SUITE_END()
