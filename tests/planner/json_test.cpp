// Plan files: to_json / from_json round trip, validation against
// schemas/plan.schema.json (Debian's python3-jsonschema) and its optimizer entries
// against the kind tables, and errors that name the file and the field.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/build.h"
#include "planner/fit_advice.h"
#include "planner/plan_json.h"
#include "planner/tune.h"
#include "tests/planner/configs.h"

using namespace popkit::planner;
using nlohmann::json;

namespace {

std::vector<Plan> sample_plans() {
  std::vector<Plan> plans;
  plans.push_back(build_plan(test::mnist_phased()));
  auto preload = test::mnist_phased();
  preload.execution.io_schedule = popkit::config::IoSchedule::kPreload;
  plans.push_back(build_plan(preload));  // ops marked "preload"
  const NetworkProfile network{1, 1.25e9, 5e-6};
  plans.push_back(build_plan(test::mnist_phased(), Program::kTrain, nullptr, &network));
  auto c = test::tiny_standard();
  plans.push_back(build_plan(c));
  c.remote.optimizer_state = true;
  plans.push_back(build_plan(c));
  c.execution.io_mode = popkit::config::IoMode::kIoOverlapped;
  plans.push_back(build_plan(c));
  auto piped = test::mnist_phased();  // pipelined: stages, slots, sends, receive buffers
  piped.execution.mode = popkit::config::ExecutionMode::kStandard;
  piped.remote = {};
  piped.pipeline.stages = 2;
  piped.execution.sync_pattern = popkit::config::SyncPattern::kReplicaAndLadder;
  plans.push_back(build_plan(piped));
  plans.push_back(build_plan(piped, Program::kEval));
  c.device.memory_per_replica = 100;     // does not fit
  c.training.gradient_accumulation = 1;  // io_overlapped falls back, with a warning
  plans.push_back(build_plan(c));
  Plan advised = build_plan(c);  // with the tuner's advice, as popplan plan writes it
  advised.not_fitting.advice = popkit::planner::advise_fit(c).front();
  plans.push_back(std::move(advised));
  // A language model: sequences, a tied head (its add op; phased, its gradient's remote
  // buffer), the kinds' keys of each type.
  plans.push_back(build_plan(test::gpt()));
  auto phased = test::gpt();
  phased.execution.mode = popkit::config::ExecutionMode::kPhased;
  plans.push_back(build_plan(phased));
  auto untied = test::gpt({.tied = false});
  untied.execution.mode = popkit::config::ExecutionMode::kPhased;
  plans.push_back(build_plan(untied));
  plans.push_back(build_plan(untied, Program::kEval));
  return plans;
}

std::string error_of(const json& j) {
  try {
    plan_from_json(j, "plan.json");
  } catch (const popkit::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The same file read from its text, with its arrays split off while parsing.
std::string text_error_of(const json& j) {
  try {
    plan_from_text(j.dump(1), "plan.json");
  } catch (const popkit::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_json)

BOOST_AUTO_TEST_CASE(round_trip_is_exact) {
  for (const Plan& p : sample_plans()) {
    const json j = plan_to_json(p);
    const Plan back = plan_from_json(j, "plan.json");
    BOOST_TEST(plan_to_json(back) == j);
    BOOST_TEST(back.phases.size() == p.phases.size());
    BOOST_TEST(back.peak_bytes == p.peak_bytes);
    BOOST_TEST(back.fits == p.fits);
    BOOST_TEST(back.not_fitting.largest == p.not_fitting.largest, boost::test_tools::per_element());
    BOOST_TEST(back.warnings == p.warnings, boost::test_tools::per_element());
    BOOST_TEST((back.sharding_grouping == p.sharding_grouping));
    BOOST_TEST(back.not_fitting.advice.has_value() == p.not_fitting.advice.has_value());
    if (p.not_fitting.advice)
      BOOST_TEST(back.not_fitting.advice->settings == p.not_fitting.advice->settings,
                 boost::test_tools::per_element());
  }
}

// The writer streams the text (planner/json_writer.h); it must be the text a DOM of the
// same document dumps, keys in a DOM's order, numbers and strings as nlohmann writes them.
BOOST_AUTO_TEST_CASE(the_streamed_text_is_the_doms) {
  auto plans = sample_plans();
  Plan measured = build_plan(test::tiny_standard());  // a CPU profile's measured keys
  measured.device_core_round_trip_seconds = 1.5e-7;
  measured.device_cache_probe_seconds = 0.25;
  measured.warnings.push_back("a \"quoted\" warning\twith a tab and \u00e9");
  measured.layers.front().attributes.set("zz_last", std::int64_t{3});  // after every key
  measured.layers.front().attributes.set("aa_first", 0.5);             // before every key
  plans.push_back(std::move(measured));
  for (const Plan& p : plans) {
    std::ostringstream out;
    write_plan_json(out, p);
    const std::string text = out.str();
    BOOST_TEST(json::parse(text).dump(1) == text);
  }
}

BOOST_AUTO_TEST_CASE(written_plans_validate_against_the_schema) {
  const std::string dir = POPKIT_BINARY_DIR "/tests/planner";
  const std::string schema = POPKIT_SOURCE_DIR "/schemas/plan.schema.json";
  const auto plans = sample_plans();
  std::string files;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const std::string path = dir + "/schema_test_plan" + std::to_string(i) + ".json";
    std::ofstream(path) << plan_to_json(plans[i]).dump(1);
    files += " " + path;
  }
  // Debian's python3-jsonschema, not whatever python3 is first on PATH.
  const std::string cmd =
      "/usr/bin/python3 -c 'import json, sys, jsonschema\n"
      "schema = json.load(open(sys.argv[1]))\n"
      "jsonschema.Draft202012Validator.check_schema(schema)\n"
      "v = jsonschema.Draft202012Validator(schema)\n"
      "bad = 0\n"
      "for f in sys.argv[2:]:\n"
      "    for e in v.iter_errors(json.load(open(f))):\n"
      "        bad += 1; print(f, list(e.absolute_path), e.message[:300])\n"
      "sys.exit(1 if bad else 0)' " +
      schema + files;
  BOOST_TEST(std::system(cmd.c_str()) == 0);
}

// An object of the plan schema whose keys depend on a kind (a layer, the optimizer) has one
// if/then entry per kind, requiring exactly the keys plan files write for it (the kind's
// keys, config/layer_kinds.h and config/optimizer_kinds.h), and its `type` names the kinds.
template <typename Kinds>
void check_kind_entries(const json& object, const Kinds& kinds, const char* what) {
  BOOST_TEST(object["allOf"].size() == kinds.size());
  std::vector<std::string> names;
  for (const auto& kind : kinds) {
    const std::string name(kind.type);
    names.push_back(name);
    std::vector<std::string> keys;
    for (const auto& key : kind.keys) keys.emplace_back(key.name);
    bool found = false;
    for (const json& entry : object["allOf"]) {
      if (entry["if"]["properties"]["type"]["const"] != name) continue;
      found = true;
      BOOST_TEST(entry["then"]["required"].get<std::vector<std::string>>() == keys,
                 boost::test_tools::per_element());
    }
    BOOST_TEST(found, "no plan schema entry for " << what << " " << name);
  }
  BOOST_TEST(object["properties"]["type"]["enum"].get<std::vector<std::string>>() == names,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(schema_kind_entries_are_the_kind_tables) {
  std::ifstream in(POPKIT_SOURCE_DIR "/schemas/plan.schema.json");
  const json schema = json::parse(in);
  check_kind_entries(schema["properties"]["optimizer"], popkit::config::optimizer_kind_rules(),
                     "optimizer");
  check_kind_entries(schema["$defs"]["layer"], popkit::config::layer_kind_rules(), "layer");
}

BOOST_AUTO_TEST_CASE(another_version_is_refused) {
  json j = plan_to_json(build_plan(test::tiny_standard()));
  j["version"] = 7;
  BOOST_TEST(error_of(j) == "plan.json: version: plan format 7 is newer than this build reads (6)");
  j["version"] = 5;  // a tied head's backward adding to its owner's accumulator (grads_add)
  BOOST_TEST(
      error_of(j) ==
      "plan.json: version: plan format 5 is older than this build reads (6): plan the config "
      "again with this build's popplan plan");
}

BOOST_AUTO_TEST_CASE(operand_lists_follow_the_kind) {
  const json good = plan_to_json(build_plan(test::tiny_standard()));
  // The first op inside the repeat loop that is a forward.
  auto forward = [](json& j) -> json& {
    for (json& op : j["phases"][0]["ops"])
      if (op["kind"] == "repeat")
        for (json& inner : op["body"])
          if (inner["kind"] == "forward") return inner;
    throw std::runtime_error("no forward");
  };
  json j = good;
  forward(j)["inputs"].erase(2);
  BOOST_TEST(error_of(j).find("(forward): has 2 inputs but a forward takes 3 (in, weight, bias)") !=
                 std::string::npos,
             error_of(j));
  j = good;
  forward(j)["inputs"][1] = -2;
  BOOST_TEST(error_of(j).find("inputs[1]: -2 is not a tensor index (-1 to 2147483647)") !=
                 std::string::npos,
             error_of(j));
}

BOOST_AUTO_TEST_CASE(errors_name_the_file_and_the_field) {
  const json good = plan_to_json(build_plan(test::tiny_standard()));
  json j = good;
  j.erase("micro_batch_size");
  BOOST_TEST(error_of(j) == "plan.json: micro_batch_size: missing");
  j = good;
  j["phases"][0]["ops"][7]["body"][1]["kind"] = "fly";  // the repeat, after the workspace alloc
  BOOST_TEST(error_of(j).rfind(
                 "plan.json: phases[0].ops[7].body[1].kind: 'fly' is not one of alloc, free,", 0) ==
             0);
  j = good;
  j["tensors"][2]["nbytes"] = "many";
  BOOST_TEST(error_of(j) ==
             "plan.json: tensors[2].nbytes: expected a non-negative integer, got \"many\"");
  j = good;
  j["phases"][0]["ops"][0]["outputs"][0] = 99;
  BOOST_TEST(error_of(j) ==
             "plan.json: plan: phase 'forward+loss+backward+optimizer', op 0 (alloc): tensor index "
             "99 out of range");
}

BOOST_AUTO_TEST_CASE(reading_the_text_gives_the_same_plan) {
  for (const Plan& p : sample_plans()) {
    const json j = plan_to_json(p);
    BOOST_TEST(plan_to_json(plan_from_text(j.dump(1), "plan.json")) == j);
  }
}

BOOST_AUTO_TEST_CASE(reading_the_text_gives_the_same_errors) {
  const json good = plan_to_json(build_plan(test::mnist_phased()));
  std::vector<json> bad;
  auto variant = [&](auto change) {
    json j = good;
    change(j);
    bad.push_back(j);
  };
  variant([](json& j) {
    for (json& op : j["phases"][0]["ops"])
      if (op["kind"] == "repeat") op["body"][1]["kind"] = "fly";
  });
  variant([](json& j) { j["phases"][2]["ops"][3].erase("kind"); });
  variant([](json& j) { j["phases"][2]["ops"] = 5; });
  variant([](json& j) { j["phases"][1]["ops"][0]["outputs"][0] = 999; });  // check_plan
  variant([](json& j) { j["setup"][0] = "alloc"; });
  variant([](json& j) { j["layers"][1].erase("name"); });
  variant([](json& j) { j["variables"][3]["sharded"] = 1; });
  variant([](json& j) { j["tensors"][2]["nbytes"] = "many"; });
  variant([](json& j) { j["buffers"] = json::object(); });
  variant([](json& j) { j["buffers"][0]["rows"] = -1.5; });
  // Two errors: the reader's order decides which is reported (version before phases,
  // although the file holds phases first).
  variant([](json& j) {
    j["version"] = 7;
    j["phases"][0]["ops"][0]["kind"] = 1;
  });
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const std::string dom = error_of(bad[i]);
    BOOST_TEST(dom != "(no error)", "variant " << i);
    BOOST_TEST(text_error_of(bad[i]) == dom, "variant " << i);
  }
}

BOOST_AUTO_TEST_CASE(integers_beyond_their_field_are_errors) {
  const json good = plan_to_json(build_plan(test::tiny_standard()));
  json j = good;
  j["version"] = 4294967297;  // was read as version 1
  BOOST_TEST(error_of(j) ==
             "plan.json: version: plan format 4294967297 is newer than this build reads (6)");
  j = good;
  j["phases"][0]["ops"][0]["outputs"][0] = 4294967296;  // was read as tensor 0
  BOOST_TEST(error_of(j) ==
             "plan.json: phases[0].ops[0].outputs[0]: 4294967296 is not a tensor index (-1 to "
             "2147483647)");
  j = good;
  j["replication_factor"] = 18446744073709551615u;  // was read as -1
  BOOST_TEST(error_of(j) ==
             "plan.json: replication_factor: 18446744073709551615 is out of range (at most "
             "9223372036854775807)");
  j = good;
  j["tensors"][0]["shape"][0] = 9223372036854775808u;
  BOOST_TEST(error_of(j) ==
             "plan.json: tensors[0].shape[0]: 9223372036854775808 is out of range (at most "
             "9223372036854775807)");
}

BOOST_AUTO_TEST_CASE(messages_quote_values_briefly) {
  const json good = plan_to_json(build_plan(test::tiny_standard()));
  json j = good;
  j["name"] = json::array();
  for (int i = 0; i < 10000; ++i) j["name"].push_back(i);
  BOOST_TEST(error_of(j) == "plan.json: name: expected a string, got an array");
  j = good;
  j["peak_bytes"] = std::string(10000, 'x');
  BOOST_TEST(error_of(j) == "plan.json: peak_bytes: expected a non-negative integer, got \"" +
                                std::string(40, 'x') + "\"...");
  j = good;
  j["mode"] = std::string(10000, 'y');
  BOOST_TEST(error_of(j) ==
             "plan.json: mode: '" + std::string(40, 'y') + "...' is not one of phased, standard");
}

BOOST_AUTO_TEST_SUITE_END()
