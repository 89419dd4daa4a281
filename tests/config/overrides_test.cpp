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
  BOOST_TEST((c.model.layers[0].activation == Activation::kGelu));
  BOOST_TEST(c.device.memory_per_replica == 1500000000u);
  BOOST_TEST(!c.data.shuffle);
}

BOOST_AUTO_TEST_CASE(later_overrides_win_and_replace_file_values) {
  const auto result = load(kBase + "training: {micro_batch_size: 2}\n",
                           {"training.micro_batch_size=3", "training.micro_batch_size=5"});
  BOOST_REQUIRE(result.ok());
  BOOST_TEST(result.config->training.micro_batch_size == 5);
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

BOOST_AUTO_TEST_SUITE_END()
