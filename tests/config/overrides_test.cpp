// --set overrides: typed as YAML, validated like the file, errors pointing at the
// argument (source "--set", line = which --set, column inside it).
#include <boost/test/unit_test.hpp>

#include "tests/config/helpers.h"

using namespace popkit::config;
using namespace popkit::config::test;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_SUITE(overrides)

BOOST_AUTO_TEST_CASE(values_are_typed_as_yaml) {
  const auto result = load(kBase, {"training.micro_batch_size=4",
                                   "replication={factor: 2, groupings: {all: "
                                   "{group_size: 2}}}",
                                   "sharding.grouping=all", "model.layers.0.activation=gelu",
                                   "device.memory_per_replica=1.5GB", "data.shuffle=false"});
  BOOST_REQUIRE_MESSAGE(result.ok(), text(result));
  const Config& c = *result.config;
  BOOST_TEST(c.training.micro_batch_size == 4);
  BOOST_TEST(c.replication.factor == 2);
  BOOST_TEST(c.sharding.enabled);
  BOOST_TEST(c.sharding.grouping == "all");
  BOOST_TEST(c.model.layers[0].attributes.name("activation") == "gelu");
  BOOST_TEST(c.device.memory_per_replica == 1500000000u);
  BOOST_TEST(!c.data.shuffle);
}

BOOST_AUTO_TEST_CASE(later_overrides_win_and_replace_file_values) {
  const auto result = load(kBase + "training: {micro_batch_size: 2}\n",
                           {"training.micro_batch_size=3", "training.micro_batch_size=5"});
  BOOST_REQUIRE(result.ok());
  BOOST_TEST(result.config->training.micro_batch_size == 5);
}

// A run length set with --set replaces the file's other one, as poprun's --steps does
// (it was refused: "give training.epochs or training.steps, not both"); two --set
// arguments that give both are still refused.
BOOST_AUTO_TEST_CASE(a_run_length_replaces_the_files_other_one) {
  const auto steps = load(kBase + "training: {epochs: 2}\n", {"training.steps=5"});
  BOOST_REQUIRE_MESSAGE(steps.ok(), text(steps));
  BOOST_TEST(*steps.config->training.steps == 5);
  BOOST_TEST(!steps.config->training.epochs.has_value());
  const auto epochs = load(kBase + "training: {steps: 9}\n", {"training.epochs=3"});
  BOOST_REQUIRE_MESSAGE(epochs.ok(), text(epochs));
  BOOST_TEST(*epochs.config->training.epochs == 3);
  BOOST_TEST(!epochs.config->training.steps.has_value());
  BOOST_TEST(!load(kBase, {"training.steps=5", "training.epochs=2"}).ok());
}

BOOST_AUTO_TEST_CASE(errors_point_at_the_argument) {
  const auto result = load(kBase, {"training.seed=1", "training.micro_batch_size=0"});
  BOOST_REQUIRE(result.diagnostics.size() == 1u);
  const Diagnostic& d = result.diagnostics[0];
  BOOST_TEST(d.file == "--set");
  BOOST_TEST(d.line == 2);
  BOOST_TEST(d.column == 27);
  BOOST_TEST(text(result) ==
             "--set:2:27: error: training.micro_batch_size: must be >= 1, got 0\n"
             "training.micro_batch_size=0\n"
             "                          ^\n");
}

BOOST_AUTO_TEST_CASE(unknown_override_keys_get_suggestions) {
  const auto result = load(kBase, {"training.micro_bach_size=4"});
  BOOST_TEST(text(result) ==
             "--set:1:10: error: training: unknown key 'micro_bach_size'; did you mean "
             "'micro_batch_size'?\n"
             "training.micro_bach_size=4\n"
             "         ^\n");
}

BOOST_AUTO_TEST_CASE(malformed_overrides) {
  BOOST_TEST(errors(kBase, {"training.micro_batch_size"}) ==
                 Messages{"expected key.path=value, got 'training.micro_batch_size'"},
             tt::per_element());
  BOOST_TEST(errors(kBase, {"training..seed=1"}) ==
                 Messages{"empty key in the path; write keys separated by single dots"},
             tt::per_element());
  BOOST_TEST(errors(kBase, {"version.x=1"}) ==
                 Messages{"version is '1', not a mapping, so it has no key 'x'"},
             tt::per_element());
  BOOST_TEST(errors(kBase, {"model.layers.5.name=x"}) ==
                 Messages{"model.layers is a list of 2 items; '5' is not an index in it"},
             tt::per_element());
  const auto syntax = load(kBase, {"training={micro_batch_size: 4"});
  BOOST_REQUIRE(syntax.diagnostics.size() == 1u);
  BOOST_TEST(syntax.diagnostics[0].file == "--set");
  BOOST_TEST(syntax.diagnostics[0].line == 1);
  BOOST_TEST(syntax.diagnostics[0].message.rfind("YAML syntax: ", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(quoted_override_values_are_strings) {
  BOOST_TEST(errors(kBase, {"training.epochs=\"3\""}) ==
                 Messages{"training.epochs: expected an integer, got the string \"3\""},
             tt::per_element());
}

// `group_size: all` (or no group_size) follows the factor, so one --set reshapes it.
BOOST_AUTO_TEST_CASE(groupings_of_all_replicas_follow_the_factor) {
  const std::string yaml = kBase +
                           "replication:\n  factor: 2\n  groupings:\n    everyone: {group_size: "
                           "all}\n    implicit: {}\nsharding: {grouping: everyone}\n";
  const auto at_2 = load(yaml);
  BOOST_REQUIRE_MESSAGE(at_2.ok(), text(at_2));
  BOOST_TEST(at_2.config->replication.groupings[0].group_size == 2);
  BOOST_TEST(at_2.config->replication.groupings[1].group_size == 2);
  const auto at_4 = load(yaml, {"replication.factor=4"});
  BOOST_REQUIRE_MESSAGE(at_4.ok(), text(at_4));
  BOOST_TEST(at_4.diagnostics.empty());
  BOOST_TEST(at_4.config->replication.groupings[0].group_size == 4);
  BOOST_TEST(at_4.config->replication.groupings[1].group_size == 4);
}

// A fixed group_size that was the file's whole factor no longer is after --set: warn,
// at the group_size, with the fix.
BOOST_AUTO_TEST_CASE(a_changed_factor_warns_about_groupings_left_at_the_old_size) {
  const std::string yaml =
      kBase + "replication:\n  factor: 2\n  groupings:\n    everyone: {group_size: 2}\n";
  const auto result = load(yaml, {"replication.factor=4"});
  BOOST_REQUIRE(result.ok());
  BOOST_TEST(text(result) ==
             "test.yaml:9:28: warning: replication.groupings.everyone.group_size: 2 was all the "
             "replicas of the file's replication.factor 2, but --set makes the factor 4, so "
             "'everyone' is now 2 groups of 2; write `group_size: all` to follow the factor, or "
             "add --set replication.groupings.everyone.group_size=4\n"
             "    everyone: {group_size: 2}\n"
             "                           ^\n");
  BOOST_TEST(load(yaml).diagnostics.empty());
  // A size given with the factor is what the user asked for.
  BOOST_TEST(load(yaml, {"replication.factor=4", "replication.groupings.everyone.group_size=2"})
                 .diagnostics.empty());
}

// factor 1 against a fixed group_size of 2: the error, then a note with the one-line fix.
BOOST_AUTO_TEST_CASE(a_factor_the_group_size_does_not_divide_suggests_the_fix) {
  const std::string yaml =
      kBase + "replication:\n  factor: 2\n  groupings:\n    everyone: {group_size: 2}\n";
  const auto result = load(yaml, {"replication.factor=1"});
  BOOST_TEST(text(result) ==
             "test.yaml:9:28: error: replication.groupings.everyone.group_size: "
             "replication.factor 1 % group_size 2 = 1, but stride 1 needs factor % group_size "
             "== 0\n"
             "    everyone: {group_size: 2}\n"
             "                           ^\n"
             "test.yaml:9:28: note: replication.groupings.everyone.group_size: for one group of "
             "all 1 replicas, add --set replication.groupings.everyone.group_size=1, or write "
             "`group_size: all` so that 'everyone' follows replication.factor\n"
             "    everyone: {group_size: 2}\n"
             "                           ^\n");
  const auto fixed =
      load(yaml, {"replication.factor=1", "replication.groupings.everyone.group_size=1"});
  BOOST_TEST(fixed.ok());
}

BOOST_AUTO_TEST_SUITE_END()
