// Device profile files: the shipped ones load, bad ones are refused with the line and the
// rule, device.profile finds a name or a path relative to the config, and what
// `popplan calibrate --write` writes reads back as the same profile.
#include "config/yaml/profile.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>

#include "tests/config/helpers.h"

using namespace popkit::config;
using namespace popkit::config::test;

namespace {

// A complete, valid profile to break one key at a time.
const std::string kProfile = R"(name: tiny
tiles: 10
memory: 1MiB
compute:
  flops_per_second: 1.0e9
  vector_flops_per_second: 1.0e8
  gemm: {max_efficiency: 0.5, half_m: 8}
links:
  ipu_link: {bytes_per_second: 1.0e9}
  streaming: {bytes_per_second: 2.0e9, latency_seconds: 1.0e-6, efficiency: 0.5, shared_by: 4}
  host: {bytes_per_second: 3.0e9}
overheads: {op_seconds: 1.0e-6}
)";

std::string profile_errors(const std::string& text) {
  const ProfileLoad r = load_profile_string(text, "p.yaml", "p");
  std::ostringstream out;
  print_diagnostics(out, r.diagnostics, r.sources);
  return out.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  BOOST_REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "popkit-profile-XXXXXX").string();
    BOOST_REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((path / name).parent_path());
    std::ofstream(path / name) << text;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(profile)

BOOST_AUTO_TEST_CASE(a_profile_file_gives_every_figure) {
  const ProfileLoad r = load_profile_string(kProfile, "p.yaml", "p");
  BOOST_REQUIRE(r.ok());
  const DeviceProfile& p = *r.profile;
  BOOST_TEST(p.name == "tiny");
  BOOST_TEST(p.tiles == 10);
  BOOST_TEST(p.memory_bytes == 1u << 20);
  BOOST_TEST(p.flops_per_second == 1e9);
  BOOST_TEST(p.gemm_half_m == 8.0);
  BOOST_TEST(p.gemm_half_n == 0.0);  // not given: no fall-off along n
  BOOST_TEST(p.streaming.efficiency == 0.5);
  BOOST_TEST(p.streaming.shared_by == 4.0);
  BOOST_TEST(p.host.efficiency == 1.0);
  BOOST_TEST(p.op_overhead_seconds == 1e-6);
  // 4 replicas share the streaming link: a quarter of 2e9 * 0.5 each; 2 replicas a half.
  BOOST_TEST(p.streaming.rate(4) == 0.25e9);
  BOOST_TEST(p.streaming.rate(2) == 0.5e9);
  BOOST_TEST(p.streaming.rate(8) == 0.25e9);
}

BOOST_AUTO_TEST_CASE(the_shipped_profiles_load) {
  const auto names = builtin_profile_names();
  BOOST_TEST(names == (std::vector<std::string>{"cpu", "ipu-mk1", "ipu-mk2"}),
             boost::test_tools::per_element());
  for (const auto& name : names) {
    BOOST_TEST_CONTEXT(name) {
      const ProfileLoad r = resolve_profile(name, "", {});
      BOOST_TEST(profile_errors(r.sources.empty() ? "" : r.sources.begin()->second) == "");
      BOOST_REQUIRE(r.ok());
      BOOST_TEST(r.profile->name == name);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_values_point_at_their_line) {
  BOOST_TEST(profile_errors(replaced(kProfile, "tiles: 10", "tiles: ten")) ==
             "p.yaml:2:8: error: tiles: expected an integer >= 1, got 'ten'\n"
             "tiles: ten\n"
             "       ^\n");
  BOOST_TEST(
      profile_errors(replaced(kProfile, "efficiency: 0.5, shared", "efficiency: 1.5, shared")) ==
      "p.yaml:10:77: error: links.streaming.efficiency: must be > 0 and at most 1, got "
      "1.5\n"
      "  streaming: {bytes_per_second: 2.0e9, latency_seconds: 1.0e-6, efficiency: 1.5, "
      "shared_by: 4}\n"
      "                                                                            ^\n");
  BOOST_TEST(profile_errors(replaced(kProfile, "op_seconds: 1.0e-6", "op_seconds: -1")) ==
             "p.yaml:12:25: error: overheads.op_seconds: must be >= 0, got -1\n"
             "overheads: {op_seconds: -1}\n"
             "                        ^\n");
  BOOST_TEST(profile_errors(replaced(kProfile, "shared_by: 4", "shared_by: 2.5")) ==
             "p.yaml:10:93: error: links.streaming.shared_by: must be a whole number >= 1, got "
             "2.5\n"
             "  streaming: {bytes_per_second: 2.0e9, latency_seconds: 1.0e-6, efficiency: 0.5, "
             "shared_by: 2.5}\n"
             "                                                                                "
             "            ^\n");
}

BOOST_AUTO_TEST_CASE(unknown_and_missing_keys) {
  BOOST_TEST(profile_errors(replaced(kProfile, "half_m: 8", "half_mm: 8")) ==
             "p.yaml:7:31: error: compute.gemm: unknown key 'half_mm'; did you mean 'half_m'?\n"
             "  gemm: {max_efficiency: 0.5, half_mm: 8}\n"
             "                              ^\n");
  BOOST_TEST(profile_errors(replaced(kProfile, "  host: {bytes_per_second: 3.0e9}\n", "")) ==
             "p.yaml:1:1: error: links.host.bytes_per_second: required key is missing\n"
             "name: tiny\n"
             "^\n");
  BOOST_TEST(profile_errors(kProfile + "fitted: {overheads.op_secs: 1.0e-6}\n") ==
             "p.yaml:13:10: error: fitted: 'overheads.op_secs' is not a parameter of a profile; "
             "did you mean 'overheads.op_seconds'?\n"
             "fitted: {overheads.op_secs: 1.0e-6}\n"
             "         ^\n");
}

BOOST_AUTO_TEST_CASE(what_calibrate_writes_reads_back) {
  ProfileLoad r =
      load_profile_string(kProfile + "fitted: {overheads.op_seconds: 2.0e-6}\n", "p.yaml", "p");
  BOOST_REQUIRE(r.ok());
  const std::string written = profile_to_yaml(*r.profile, {"a header", ""});
  BOOST_TEST(written.starts_with("# a header\n#\nname: tiny\n"));
  const ProfileLoad back = load_profile_string(written, "w.yaml", "w");
  BOOST_TEST(profile_errors(written) == "");
  BOOST_REQUIRE(back.ok());
  for (const auto& param : profile_parameters()) BOOST_TEST_CONTEXT(param.key) {
      BOOST_TEST(param.of(*back.profile) == param.of(*r.profile));
    }
  BOOST_REQUIRE(back.profile->fitted.size() == 1u);
  BOOST_TEST(back.profile->fitted[0].key == "overheads.op_seconds");
  BOOST_TEST(back.profile->fitted[0].prior == 2e-6);
  BOOST_TEST(back.profile->tiles == 10);
  BOOST_TEST(back.profile->memory_bytes == 1u << 20);
}

BOOST_AUTO_TEST_CASE(a_config_names_a_profile_file_relative_to_itself) {
  const TempDir dir;
  dir.write("profiles/mine.yaml", kProfile);
  dir.write("run/config.yaml", kBase + "device: {profile: ../profiles/mine.yaml}\n");
  const LoadResult r = load_config_file((dir.path / "run/config.yaml").string());
  BOOST_TEST(text(r) == "");
  BOOST_REQUIRE(r.ok());
  BOOST_REQUIRE(r.config->device.resolved.has_value());
  BOOST_TEST(r.config->device.resolved->name == "tiny");
  BOOST_TEST(r.config->device.resolved->source == (dir.path / "profiles/mine.yaml").string());
}

BOOST_AUTO_TEST_CASE(a_bad_profile_file_fails_the_config_with_a_note) {
  const TempDir dir;
  dir.write("bad.yaml", replaced(kProfile, "tiles: 10", "tiles: 0"));
  dir.write("config.yaml", kBase + "device: {profile: ./bad.yaml}\n");
  const std::string config = (dir.path / "config.yaml").string();
  const std::string bad = (dir.path / "bad.yaml").string();
  const LoadResult r = load_config_file(config);
  BOOST_TEST(!r.ok());
  BOOST_TEST(text(r) == bad +
                            ":2:8: error: tiles: expected an integer >= 1, got '0'\n"
                            "tiles: 0\n"
                            "       ^\n" +
                            config +
                            ":6:19: note: device.profile './bad.yaml' is read here\n"
                            "device: {profile: ./bad.yaml}\n"
                            "                  ^\n");
}

BOOST_AUTO_TEST_CASE(the_environment_adds_profile_directories_first) {
  const TempDir dir;
  dir.write("ipu-mk2.yaml", replaced(kProfile, "name: tiny", "name: ipu-mk2"));
  ::setenv("POPKIT_PROFILE_PATH", dir.path.c_str(), 1);
  const ProfileLoad r = resolve_profile("ipu-mk2", "", {});
  const auto dirs = profile_dirs();
  ::unsetenv("POPKIT_PROFILE_PATH");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r.profile->tiles == 10);  // the override, not the shipped 1472
  BOOST_TEST(dirs.front() == dir.path.string());
}

BOOST_AUTO_TEST_SUITE_END()
