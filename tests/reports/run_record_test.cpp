// The run file: round trips, the schema, and the errors a bad file gets (exact text).
#include "reports/run_record.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "reports/input_error.h"
#include "reports/source.h"
#include "tests/reports/golden.h"

namespace r = popkit::reports;
using r::testing::data_dir;
using r::testing::fixture;

namespace {

std::string load_error(const std::string& name) {
  try {
    fixture(name);
  } catch (const r::InputError& e) {
    // The reader names the path it opened; the fixtures' directory is not the point.
    std::string message = e.what();
    const std::string dir = data_dir() + "/";
    if (message.rfind(dir, 0) == 0) message.erase(0, dir.size());
    return message;
  }
  return "(no error)";
}

// Validates `file` against schemas/run.schema.json with Debian's python3-jsonschema
// (installed for /usr/bin/python3); returns the exit status.
int validate_with_schema(const std::string& file, bool quiet = false) {
  const std::string cmd = std::string("/usr/bin/python3 ") + POPKIT_SOURCE_DIR +
                          "/tests/reports/validate_run_file.py " + POPKIT_SOURCE_DIR +
                          "/schemas/run.schema.json " + file + (quiet ? " 2>/dev/null" : "");
  return std::system(cmd.c_str());
}

std::string error_of_run(const nlohmann::json& j) {
  try {
    r::run_record_from_json(j, "x.json");
  } catch (const r::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

r::RunRecord sample_record() {
  r::RunRecord rec = fixture("base.json").record;
  rec.name = "written-by-test";
  rec.environment = r::current_environment(3);
  rec.environment.kernels = "x86-64-v4 (AVX-512), chosen from cpuid";
  rec.test.reset();
  return rec;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_record)

BOOST_AUTO_TEST_CASE(json_round_trip_keeps_every_field) {
  const r::RunRecord rec = sample_record();
  const nlohmann::json j = r::run_record_to_json(rec);
  BOOST_TEST(j.at("kind") == "run");
  BOOST_TEST(j.at("version") == r::kRunFileVersion);
  const r::RunRecord back = r::run_record_from_json(j, "x.json");
  BOOST_TEST(r::run_record_to_json(back) == j);
  BOOST_TEST(back.phases.size() == 3u);
  BOOST_TEST(back.phases[2].measured.size() == 2u);
  BOOST_TEST(back.phases[2].planned.by_class[2] == 802816u);  // optimizer_state
  BOOST_TEST(!back.test.has_value());
  BOOST_TEST(back.environment.n_threads == 3);
  BOOST_TEST(back.environment.kernels == rec.environment.kernels);
}

// A pipelined run's time in sends and receives: written when not 0, read back; absent,
// it reads as 0.
BOOST_AUTO_TEST_CASE(pipeline_seconds_round_trip_and_are_optional) {
  r::RunRecord rec = sample_record();
  BOOST_TEST(
      !r::run_record_to_json(rec)["phases"][0]["measured_seconds_by_kind"].contains("pipeline"));
  rec.phases[1].measured_by_kind.pipeline = 0.25;
  const nlohmann::json j = r::run_record_to_json(rec);
  BOOST_TEST(j["phases"][1]["measured_seconds_by_kind"]["pipeline"] == 0.25);
  const r::RunRecord back = r::run_record_from_json(j, "x.json");
  BOOST_TEST(back.phases[1].measured_by_kind.pipeline == 0.25);
  BOOST_TEST(back.phases[0].measured_by_kind.pipeline == 0.0);
}

// A resumed run's fields (issue 18): written only when set, read back as written; the
// fixtures, written before run folders, have none and read as a run from scratch.
BOOST_AUTO_TEST_CASE(resumed_run_fields_round_trip_and_are_optional) {
  r::RunRecord rec = sample_record();
  BOOST_TEST(!r::run_record_to_json(rec).contains("resumed_from"));
  BOOST_TEST(!r::run_record_to_json(rec).contains("first_step"));
  BOOST_TEST(!rec.resumed_from.has_value());
  BOOST_TEST(rec.first_step == 0);
  rec.run_dir = "runs/tiny/20261125-174501-2";
  rec.first_step = 6;
  rec.resumed_from = r::ResumedFrom{"runs/tiny/20261125-174501", "",
                                    "runs/tiny/20261125-174501/checkpoint-step6.safetensors", 6};
  nlohmann::json j = r::run_record_to_json(rec);
  BOOST_TEST(j.at("resumed_from").at("run_file").is_null());
  r::RunRecord back = r::run_record_from_json(j, "x.json");
  BOOST_TEST(r::run_record_to_json(back) == j);
  BOOST_TEST(back.resumed_from->checkpoint == rec.resumed_from->checkpoint);
  BOOST_TEST(back.first_step == 6);
  BOOST_TEST(back.run_dir == rec.run_dir);
  rec.resumed_from->run_file = "runs/tiny/20261125-174501/run.json";
  rec.first_step = 0;
  j = r::run_record_to_json(rec);
  BOOST_TEST(r::run_record_from_json(j, "x.json").resumed_from->run_file ==
             "runs/tiny/20261125-174501/run.json");
  j["first_step"] = -1;
  BOOST_TEST(error_of_run(j) == "x.json: first_step: -1 is negative");
}

// The evaluations while a run trained (eval.every): written only when some ran, read back
// as written, in the schema (they were on stderr alone).
BOOST_AUTO_TEST_CASE(evaluations_round_trip_and_are_optional) {
  r::RunRecord rec = sample_record();
  BOOST_TEST(!r::run_record_to_json(rec).contains("evaluations"));
  rec.evaluations = {{4, 1, r::TestResult{0.75, 0.5, 128}},
                     {8, 2, r::TestResult{0.875, 0.25, 128}}};
  const nlohmann::json j = r::run_record_to_json(rec);
  BOOST_TEST(j.at("evaluations").size() == 2u);
  BOOST_TEST(j.at("evaluations")[1].at("step") == 8);
  BOOST_TEST(j.at("evaluations")[1].at("epoch") == 2);
  BOOST_TEST(j.at("evaluations")[1].at("accuracy") == 0.875);
  const r::RunRecord back = r::run_record_from_json(j, "x.json");
  BOOST_TEST_REQUIRE(back.evaluations.size() == 2u);
  BOOST_TEST(back.evaluations[0].step == 4);
  BOOST_TEST(back.evaluations[0].result.loss == 0.5);
  BOOST_TEST(back.evaluations[1].result.n_samples == 128);
  BOOST_TEST(r::run_record_to_json(back) == j);
}

// Where the CPUs were (runner/placement.h) and how much of the last-level cache the host
// left the threads (runner/calibrate.h cache_probe_seconds): the run's figures at its
// start and end and its profile's, written only when measured and read back as written;
// a run file from before has none and reads as 0 (not measured).
BOOST_AUTO_TEST_CASE(machine_figures_round_trip_and_are_optional) {
  r::RunRecord rec = sample_record();
  nlohmann::json j = r::run_record_to_json(rec);
  for (const char* key : {"core_round_trip_seconds", "cache_probe_seconds"})
    BOOST_TEST(!j["environment"].contains(key), key);
  for (const char* key : {"device_core_round_trip_seconds", "device_cache_probe_seconds"})
    BOOST_TEST(!j["plan"].contains(key), key);
  rec.environment.core_round_trip_start_seconds = 58e-9;
  rec.environment.core_round_trip_end_seconds = 331e-9;
  rec.plan.device_core_round_trip_seconds = 60e-9;
  for (const double probe : {131e-6, 290e-6, 120e-6, 262e-6})
    rec.environment.cache_probes.add(probe);
  rec.plan.device_cache_probe_seconds = 128e-6;
  j = r::run_record_to_json(rec);
  BOOST_TEST(j["environment"]["core_round_trip_seconds"]["start"] == 58e-9);
  BOOST_TEST(j["environment"]["core_round_trip_seconds"]["end"] == 331e-9);
  BOOST_TEST(j["plan"]["device_core_round_trip_seconds"] == 60e-9);
  const nlohmann::json& probes = j["environment"]["cache_probe_seconds"];
  BOOST_TEST(probes["start"] == 131e-6);
  BOOST_TEST(probes["end"] == 262e-6);
  BOOST_TEST(probes["min"] == 120e-6);
  BOOST_TEST(probes["max"] == 290e-6);
  BOOST_TEST(probes["probes"] == 4);
  BOOST_TEST(j["plan"]["device_cache_probe_seconds"] == 128e-6);
  const r::RunRecord back = r::run_record_from_json(j, "x.json");
  BOOST_TEST(r::run_record_to_json(back) == j);
  BOOST_TEST(back.environment.core_round_trip_end_seconds == 331e-9);
  BOOST_TEST(back.plan.device_core_round_trip_seconds == 60e-9);
  BOOST_TEST(back.environment.cache_probes.max_seconds == 290e-6);
  BOOST_TEST(back.plan.device_cache_probe_seconds == 128e-6);
  for (const char* key : {"core_round_trip_seconds", "cache_probe_seconds"}) {
    nlohmann::json bad = j;
    bad["environment"][key].erase("end");
    BOOST_TEST(error_of_run(bad) != "(no error)", key);
  }
}

BOOST_AUTO_TEST_CASE(fixtures_match_their_own_writer) {
  for (const char* name : {"base.json", "nosharding.json", "fast.json"}) {
    const nlohmann::json j = r::read_json_file(data_dir() + "/" + name);
    BOOST_TEST(r::run_record_to_json(r::run_record_from_json(j, name)) == j, name);
  }
}

// Run files written before the workspace class (issue 14 item 5) read with none.
BOOST_AUTO_TEST_CASE(run_files_without_workspace_read_as_zero) {
  nlohmann::json j = r::read_json_file(data_dir() + "/base.json");
  const r::RunRecord with = r::run_record_from_json(j, "base.json");
  j["phases"][0]["planned_memory"]["by_class"].erase("workspace");
  const r::RunRecord without = r::run_record_from_json(j, "base.json");
  BOOST_TEST(without.phases[0].planned.by_class == with.phases[0].planned.by_class);
  BOOST_TEST(without.phases[0].planned.by_class[5] == 0u);  // workspace
}

BOOST_AUTO_TEST_CASE(written_run_files_follow_the_schema) {
  const auto dir = std::filesystem::temp_directory_path() / "popkit_reports_run_record_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "run.json").string();
  r::RunRecord rec = sample_record();
  r::write_run_file(rec, path);
  BOOST_TEST(validate_with_schema(path) == 0);
  rec.test = r::TestResult{0.96, 0.125, 2000};
  r::write_run_file(rec, path);
  BOOST_TEST(validate_with_schema(path) == 0);
  rec.run_dir = "runs/x/20261125-174501-2";
  rec.resumed_from = r::ResumedFrom{"runs/x/20261125-174501", "runs/x/20261125-174501/run.json",
                                    "runs/x/20261125-174501/checkpoint-step6.safetensors", 6};
  r::write_run_file(rec, path);
  BOOST_TEST(validate_with_schema(path) == 0);
  rec.environment.core_round_trip_start_seconds = 58e-9;
  rec.environment.core_round_trip_end_seconds = 61e-9;
  rec.plan.device_core_round_trip_seconds = 60e-9;
  r::write_run_file(rec, path);
  BOOST_TEST(validate_with_schema(path) == 0);
  BOOST_TEST(!std::filesystem::exists(path + ".tmp"));
  for (const char* name : {"base.json", "nosharding.json", "fast.json"}) {
    BOOST_TEST(validate_with_schema(data_dir() + "/" + name) == 0, name);
  }
  // The schema is a contract, not a formality: a file missing a field fails it.
  BOOST_TEST(validate_with_schema(data_dir() + "/missing_field.json", true) != 0);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(paths_that_are_not_utf8_are_written_as_replacement_characters) {
  const auto dir = std::filesystem::temp_directory_path() / "popkit_reports_run_record_utf8";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "run.json").string();
  r::RunRecord rec = sample_record();
  rec.checkpoints = {{"runs/\xff/step-1.safetensors", 1}};
  r::write_run_file(rec, path);
  const r::RunRecord back = r::run_record_from_json(r::read_json_file(path), path);
  BOOST_TEST(back.checkpoints.at(0).path == "runs/\xEF\xBF\xBD/step-1.safetensors");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(bad_files_are_named_with_the_field) {
  BOOST_TEST(load_error("not_json.json") ==
             "not_json.json:1:1: not JSON: a JSON document begins with '{', '[', a string, a "
             "number, true, false or null");
  BOOST_TEST(load_error("wrong_kind.json") ==
             "wrong_kind.json: kind: \"config\" is neither a plan nor a run file (want \"plan\" "
             "or \"run\")");
  BOOST_TEST(load_error("newer_version.json") ==
             "newer_version.json: version: 2 is newer than this build of popkit reads (1)");
  BOOST_TEST(load_error("missing_field.json") ==
             "missing_field.json: phases[1].planned_memory.peak: missing");
  BOOST_TEST(load_error("wrong_type.json") ==
             "wrong_type.json: throughput.median: expected a number, got a string");
  BOOST_TEST(load_error("no_such_file.json") == "no_such_file.json: no such file");
}

BOOST_AUTO_TEST_CASE(integers_beyond_their_field_are_errors) {
  nlohmann::json j = r::read_json_file(data_dir() + "/base.json");
  j["version"] = 4294967297;  // was read as version 1
  BOOST_TEST(error_of_run(j) ==
             "x.json: version: 4294967297 is newer than this build of popkit "
             "reads (1)");
  j = r::read_json_file(data_dir() + "/base.json");
  j["throughput"]["warmup_steps"] = 18446744073709551615u;  // was read as -1
  BOOST_TEST(error_of_run(j) ==
             "x.json: throughput.warmup_steps: 18446744073709551615 is out of range (at most "
             "9223372036854775807)");
  j["throughput"]["warmup_steps"] = "x";
  j["test"] = {{"accuracy", 18446744073709551615u}, {"loss", 0}, {"n_samples", 1}};
  j["name"] = 18446744073709551615u;
  BOOST_TEST(error_of_run(j) == "x.json: name: expected a string, got an integer");
}

BOOST_AUTO_TEST_CASE(reading_the_text_gives_the_same_record) {
  for (const char* name : {"base.json", "nosharding.json", "fast.json"}) {
    const std::string text = r::testing::read_text(data_dir() + "/" + name);
    const nlohmann::json j = nlohmann::json::parse(text);
    BOOST_TEST(r::run_record_to_json(r::run_record_from_text(text, name)) ==
                   r::run_record_to_json(r::run_record_from_json(j, name)),
               name);
    BOOST_TEST(r::run_record_to_json(r::source_from_text(text, name).record) ==
                   r::run_record_to_json(r::run_record_from_json(j, name)),
               name);
  }
}

BOOST_AUTO_TEST_CASE(reading_the_text_gives_the_same_errors) {
  const nlohmann::json good = r::read_json_file(data_dir() + "/nosharding.json");
  BOOST_TEST_REQUIRE(good["step_seconds"].size() >= 2u);
  BOOST_TEST_REQUIRE(good["loss"].size() >= 2u);
  std::vector<std::pair<nlohmann::json, std::string>> bad(7, {good, "phases["});
  bad[0].first["phases"][1]["measured_memory"][1].erase("peak");
  bad[1].first["phases"][0]["measured_memory"][0]["by_class"]["weights"] = -1;
  bad[2].first["phases"][2]["measured_memory"] = {1, 2};
  // The reader's order decides: the phase's name is read before its measured memory.
  bad[3].first["phases"][0]["measured_memory"] = nlohmann::json::array({nullptr});
  bad[3].first["phases"][0]["name"] = 3;
  // Every step's time and loss, read as the text is parsed: the first bad element.
  bad[4] = {good, "loss[1]: expected a number, got a string"};
  bad[4].first["loss"][1] = "2.3";
  bad[5] = {good, "step_seconds[0]: -0.5 is negative"};
  bad[5].first["step_seconds"][0] = -0.5;
  bad[5].first["step_seconds"][1] = nullptr;
  bad[6] = {good, "step_seconds[1]: expected a number, got null"};
  bad[6].first["step_seconds"][1] = nullptr;
  bad[6].first["loss"][0] = true;
  for (const auto& [j, field] : bad) {
    const std::string dom = error_of_run(j);
    BOOST_TEST(dom.rfind("x.json: " + field, 0) == 0u, dom);
    std::string text;
    try {
      r::run_record_from_text(j.dump(2), "x.json");
      text = "(no error)";
    } catch (const r::InputError& e) {
      text = e.what();
    }
    BOOST_TEST(text == dom);
  }
}

BOOST_AUTO_TEST_CASE(wrong_kind_for_the_run_reader) {
  nlohmann::json j = r::read_json_file(data_dir() + "/base.json");
  j["kind"] = "plan";
  try {
    r::run_record_from_json(j, "p.json");
    BOOST_FAIL("no error");
  } catch (const r::InputError& e) {
    BOOST_TEST(std::string(e.what()) == "p.json: kind: \"plan\" is not a run file (want \"run\")");
  }
}

BOOST_AUTO_TEST_CASE(throughput_is_the_median_after_warmup) {
  // 64 samples per step: 640, 512, 800, 640 samples/s after the first step.
  const r::Throughput t = r::throughput_from_steps({0.5, 0.1, 0.125, 0.08, 0.1}, 64, 1);
  BOOST_TEST(t.median == 640.0);
  BOOST_TEST(t.min == 512.0);
  BOOST_TEST(t.max == 800.0);
  BOOST_TEST(t.warmup_steps == 1);
  // Warm-up shrinks so one step still counts; odd counts take the middle value.
  const r::Throughput one = r::throughput_from_steps({0.5}, 64, 3);
  BOOST_TEST(one.warmup_steps == 0);
  BOOST_TEST(one.median == 128.0);
  BOOST_TEST(r::throughput_from_steps({}, 64, 1).median == 0.0);
}

BOOST_AUTO_TEST_CASE(median_is_the_sorted_middle) {
  BOOST_TEST(r::median({}) == 0.0);
  BOOST_TEST(r::median({3.0}) == 3.0);
  BOOST_TEST(r::median({4.0, 1.0}) == 2.5);
  // Against the sorted vector's middle, odd and even counts, repeated values among them.
  std::mt19937 rng(7);
  for (std::size_t n = 1; n < 60; ++n) {
    std::vector<double> v(n);
    for (double& x : v) x = static_cast<double>(rng() % 20) / 4.0;
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const double want = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    BOOST_TEST(r::median(v) == want, "n " << n);
  }
}

BOOST_AUTO_TEST_CASE(environment_names_this_build) {
  const r::Environment e = r::current_environment(2);
  BOOST_TEST(e.n_threads == 2);
  BOOST_TEST(e.n_cores >= 1);
  BOOST_TEST(!e.cpu_model.empty());
  BOOST_TEST(!e.compiler.empty());
  BOOST_TEST(!e.popkit_version.empty());
}

BOOST_AUTO_TEST_SUITE_END()
