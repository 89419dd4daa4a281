// Device profile files: the shipped ones load, bad ones are refused with the line and the
// rule, device.profile finds a name or a path relative to the config, and what
// `popplan calibrate --write` writes reads back as the same profile.
#include "config/yaml/profile.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
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

// The errors' messages alone, in the order reported.
std::vector<std::string> profile_messages(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& d : load_profile_string(text, "p.yaml", "p").diagnostics)
    out.push_back(fmt::format("{}:{}: {}", d.line, d.column, d.message));
  return out;
}

// kProfile made a CPU's, with `lines` added under compute (each indented two spaces).
std::string cpu_profile(const std::string& compute_lines, const std::string& more = "") {
  std::string text = kProfile;
  const std::string at = "  vector_flops_per_second: 1.0e8\n";
  text.insert(text.find(at) + at.size(), "  host_threads: 4\n" + compute_lines);
  return text + more;
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
             "p.yaml:2:8: error: tiles: expected a number, got 'ten'\n"
             "tiles: ten\n"
             "       ^\n");
  BOOST_TEST(
      profile_errors(replaced(kProfile, "efficiency: 0.5, shared", "efficiency: 1.5, shared")) ==
      "p.yaml:10:77: error: links.streaming.efficiency: must be from 1e-6 to 1, got 1.5\n"
      "  streaming: {bytes_per_second: 2.0e9, latency_seconds: 1.0e-6, efficiency: 1.5, "
      "shared_by: 4}\n"
      "                                                                            ^\n");
  BOOST_TEST(profile_errors(replaced(kProfile, "op_seconds: 1.0e-6", "op_seconds: -1")) ==
             "p.yaml:12:25: error: overheads.op_seconds: must be from 0 to 1 s, got -1\n"
             "overheads: {op_seconds: -1}\n"
             "                        ^\n");
  BOOST_TEST(profile_errors(replaced(kProfile, "shared_by: 4", "shared_by: 2.5")) ==
             "p.yaml:10:93: error: links.streaming.shared_by: must be a whole number from 1 to "
             "1e6 replicas, got 2.5\n"
             "  streaming: {bytes_per_second: 2.0e9, latency_seconds: 1.0e-6, efficiency: 0.5, "
             "shared_by: 2.5}\n"
             "                                                                                "
             "            ^\n");
}

// No value a file may hold makes an estimate inf, nan or 0 samples/s: rates too slow for
// any machine, inf, nan, out of a double's range and negative are refused with the bound.
BOOST_AUTO_TEST_CASE(absurd_values_are_refused_with_the_bound) {
  const auto rate = [](const std::string& value) {
    return profile_messages(
        replaced(kProfile, "flops_per_second: 1.0e9", "flops_per_second: " + value));
  };
  const std::string bound =
      "5:21: compute.flops_per_second: must be from 1000 to 1e21 FLOP/s, got ";
  BOOST_TEST(rate("1e-300") == Messages{bound + "1e-300"}, boost::test_tools::per_element());
  BOOST_TEST(rate(".inf") == Messages{bound + ".inf"}, boost::test_tools::per_element());
  BOOST_TEST(rate("-.Inf") == Messages{bound + "-.Inf"}, boost::test_tools::per_element());
  BOOST_TEST(rate(".nan") == Messages{bound + ".nan"}, boost::test_tools::per_element());
  BOOST_TEST(rate("1e999") == Messages{bound + "1e999"}, boost::test_tools::per_element());
  BOOST_TEST(rate("-1.0e9") == Messages{bound + "-1.0e9"}, boost::test_tools::per_element());
  BOOST_TEST(rate("0") == Messages{bound + "0"}, boost::test_tools::per_element());
  BOOST_TEST(
      profile_messages(replaced(kProfile, "max_efficiency: 0.5", "max_efficiency: 1e-300")) ==
          Messages{"7:26: compute.gemm.max_efficiency: must be from 1e-6 to 1, got 1e-300"},
      boost::test_tools::per_element());
  BOOST_TEST(profile_messages(replaced(kProfile, "memory: 1MiB", "memory: 0")) ==
                 Messages{"3:9: memory: must be from 1 to 1e18 B, got 0"},
             boost::test_tools::per_element());
  BOOST_TEST(profile_messages(replaced(cpu_profile(""), "host_threads: 4", "host_threads: 2.5")) ==
                 Messages{"7:17: compute.host_threads: must be 0 or a whole number from 1 to 1e6 "
                          "threads, got 2.5"},
             boost::test_tools::per_element());
}

// Parameters that price one term together: one alone prices nothing or divides by 0, so a
// file that sets it without the others is refused at its line, naming what is missing.
BOOST_AUTO_TEST_CASE(a_parameter_needs_its_partners) {
  BOOST_TEST(profile_errors(replaced(cpu_profile(""), "half_m: 8}", "half_m: 8, small_rows: 8}")) ==
             "p.yaml:8:54: error: compute.gemm.small_rows: 8 needs "
             "compute.gemm.small_rows_efficiency too\n"
             "  gemm: {max_efficiency: 0.5, half_m: 8, small_rows: 8}\n"
             "                                                     ^\n");
  const auto gemm = [](const std::string& keys) {
    return profile_messages(replaced(cpu_profile(""), "half_m: 8}", "half_m: 8, " + keys + "}"));
  };
  BOOST_TEST(gemm("small_rows_efficiency: 0.3") ==
                 Messages{"8:65: compute.gemm.small_rows_efficiency: 0.3 needs "
                          "compute.gemm.small_rows too"},
             boost::test_tools::per_element());
  BOOST_TEST(gemm("small_rows: 8, small_rows_efficiency: 0") ==
                 Messages{"8:54: compute.gemm.small_rows: 8 needs "
                          "compute.gemm.small_rows_efficiency (not 0) too"},
             boost::test_tools::per_element());
  BOOST_TEST(gemm("small_rows: 8, small_rows_efficiency: 0.3").empty());
  // Three together: each missing one named once, at the first one set.
  BOOST_TEST(profile_messages(cpu_profile("", "caches: {warm_bytes: 1.0e6}\n")) ==
                 Messages{"14:22: caches.warm_bytes: 1.0e6 needs caches.cold_bytes and "
                          "caches.gemm_bytes_per_second too"},
             boost::test_tools::per_element());
  BOOST_TEST(profile_messages(cpu_profile(
                 "",
                 "caches: {warm_bytes: 1.0e6, cold_bytes: 1.0e5, gemm_bytes_per_second: "
                 "1.0e9}\n")) ==
                 Messages{"14:41: caches.cold_bytes: 1.0e5 must be at least caches.warm_bytes "
                          "(1.0e6)"},
             boost::test_tools::per_element());
}

// A device's profile has no CPU's parameters: each would price work a device never does.
BOOST_AUTO_TEST_CASE(a_cpu_parameter_on_a_device_is_refused) {
  BOOST_TEST(
      profile_messages(replaced(kProfile, "half_m: 8}", "half_m: 8, spread_efficiency: 0.5}")) ==
          Messages{"7:61: compute.gemm.spread_efficiency: only a CPU's profile (one with "
                   "compute.host_threads) has this parameter; this one is a device's"},
      boost::test_tools::per_element());
  // 0 is what a device's file may say of them: unset.
  BOOST_TEST(
      profile_messages(replaced(kProfile, "half_m: 8}", "half_m: 8, small_rows: 0}")).empty());
}

// The table itself: every check above reads its columns, so they must agree with each
// other (a partner names its partner back, a floor is a parameter of the same kinds).
BOOST_AUTO_TEST_CASE(the_key_table_is_consistent) {
  for (const auto& param : profile_parameters()) BOOST_TEST_CONTEXT(param.key) {
      BOOST_TEST(find_profile_parameter(param.key) == &param);
      BOOST_TEST(param.bounds.min <= param.bounds.max);
      BOOST_TEST(std::isfinite(param.bounds.max));
      BOOST_TEST(!param.what.empty());
      // A required parameter has no "unset"; one that may be 0 has a bound above it or says
      // what 0 means.
      if (param.required) BOOST_TEST(param.unset.empty());
      BOOST_TEST((param.bounds.min == 0.0 || param.required || !param.unset.empty() ||
                  param.allows(param.of(DeviceProfile{}))));
      for (const std::string_view partner : param.partners) {
        if (partner.empty()) continue;
        const ProfileParameter* q = find_profile_parameter(partner);
        BOOST_REQUIRE(q != nullptr);
        BOOST_TEST((q->kinds == param.kinds));
        BOOST_TEST(
            (std::find(q->partners.begin(), q->partners.end(), param.key) != q->partners.end()));
      }
      if (!param.at_least.empty()) {
        const ProfileParameter* q = find_profile_parameter(param.at_least);
        BOOST_REQUIRE(q != nullptr);
        BOOST_TEST((q->kinds == param.kinds));
        BOOST_TEST(q->unit == param.unit);
      }
    }
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
  BOOST_TEST(profile_messages(kProfile + "fitted: {tiles: 10}\n") ==
                 Messages{"13:10: fitted: 'tiles' is not a parameter calibration fits (it fits "
                          "numbers that need not be whole, not tiles, memory or counts)"},
             boost::test_tools::per_element());
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
  BOOST_TEST(text(r) ==
             bad +
                 ":2:8: error: tiles: must be a whole number from 1 to 1e6 tiles, got 0\n"
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
