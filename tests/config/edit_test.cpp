// Settings applied to a config's text (config/yaml/edit.h): the exact text that comes
// out, and that it loads as the same settings given to --set would.
#include "config/yaml/edit.h"

#include <boost/test/unit_test.hpp>

#include "tests/config/helpers.h"

using namespace popkit::config;
using namespace popkit::config::test;

namespace {

// The edited text; the test fails when a setting was refused.
std::string edited(const std::string& yaml, const std::vector<std::string>& settings,
                   std::vector<std::string>* changed = nullptr) {
  const TextEdit e = set_in_text(yaml, "test.yaml", settings);
  BOOST_TEST_REQUIRE(e.diagnostics.empty(),
                     (e.diagnostics.empty() ? "" : e.diagnostics[0].message));
  if (changed) *changed = e.changed;
  // What --set makes of the original, the edited text is.
  const auto want = load(yaml, settings);
  const auto got = load(e.text);
  BOOST_TEST_REQUIRE(got.ok(), text(got));
  BOOST_TEST_REQUIRE(want.ok(), text(want));
  BOOST_TEST((*got.config == *want.config));
  return e.text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(edit)

BOOST_AUTO_TEST_CASE(a_scalar_is_replaced_where_it_is_and_its_comment_stays_in_its_column) {
  const std::string yaml = kBase +
                           "training:\n"
                           "  micro_batch_size: 8      # per replica\n"
                           "  gradient_accumulation: 4\n";
  std::vector<std::string> changed;
  BOOST_TEST(edited(yaml, {"training.micro_batch_size=1024", "training.gradient_accumulation=4"},
                    &changed) == kBase +
                                     "training:\n"
                                     "  micro_batch_size: 1024   # per replica\n"
                                     "  gradient_accumulation: 4\n");
  // The value as written already: no change.
  BOOST_TEST(changed == std::vector<std::string>{"training.micro_batch_size=1024"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(flow_maps_take_values_and_keys_in_schema_order) {
  const std::string yaml = kBase + "device: {memory_per_replica: 900MiB}   # the chip\n" +
                           "remote: {weights: true}\n" + "execution: {io_tiles: 32}\n";
  BOOST_TEST(edited(yaml, {"device.memory_per_replica=4MiB", "device.profile=ipu-mk1",
                           "remote.optimizer_state=true", "execution.mode=phased"}) ==
             kBase + "device: {profile: ipu-mk1, memory_per_replica: 4MiB}   # the chip\n" +
                 "remote: {weights: true, optimizer_state: true}\n" +
                 "execution: {mode: phased, io_tiles: 32}\n");
}

BOOST_AUTO_TEST_CASE(missing_keys_go_under_their_parent_after_the_key_before_them) {
  const std::string yaml = "# header\n" + kBase +
                           "replication:\n"
                           "    factor: 2          # deeper indentation is kept\n"
                           "\n"
                           "# training starts here\n"
                           "training:\n"
                           "  epochs: 1\n";
  BOOST_TEST(edited(yaml, {"sharding.threshold=512", "training.micro_batch_size=16",
                           "replication.groupings.g={group_size: 2, stride: 1}"}) ==
             "# header\n" + kBase +
                 "replication:\n"
                 "    factor: 2          # deeper indentation is kept\n"
                 "    groupings:\n"
                 "      g: {group_size: 2, stride: 1}\n"
                 "sharding:\n"
                 "  threshold: 512\n"
                 "\n"
                 "# training starts here\n"
                 "training:\n"
                 "  micro_batch_size: 16\n"
                 "  epochs: 1\n");
}

BOOST_AUTO_TEST_CASE(a_key_at_the_end_of_a_file_without_a_final_newline) {
  BOOST_TEST(edited(kBase + "eval: {every: 1}", {"device.memory_per_replica=1MiB"}) ==
             kBase + "eval: {every: 1}\ndevice:\n  memory_per_replica: 1MiB");
}

BOOST_AUTO_TEST_CASE(a_list_or_an_empty_value_is_replaced_whole) {
  const std::string yaml = kBase +
                           "execution:\n"
                           "  mode: phased\n"
                           "  phases:\n"
                           "    - [fc1.forward]\n"
                           "    # the last layer in one phase\n"
                           "    - [fc2.forward, fc2.backward]\n"
                           "    - [fc1.backward]\n"
                           "  io_mode: io    # one IO slot\n"
                           "  io_tiles: 32\n"
                           "sharding:\n"
                           "remote:\n";
  BOOST_TEST(edited(yaml, {"execution.phases=auto", "sharding.threshold=4",
                           "remote.weights=true"}) == kBase +
                                                          "execution:\n"
                                                          "  mode: phased\n"
                                                          "  phases: auto\n"
                                                          "  io_mode: io    # one IO slot\n"
                                                          "  io_tiles: 32\n"
                                                          "sharding: {threshold: 4}\n"
                                                          "remote: {weights: true}\n");
}

BOOST_AUTO_TEST_CASE(quoted_scalars_and_a_byte_order_mark) {
  const std::string yaml = "\xEF\xBB\xBFname: \"it's\"\n" + kBase + "data: {dataset: 'mnist'}\n";
  BOOST_TEST(edited(yaml, {"name=tuned", "data.dataset=synthetic"}) ==
             "\xEF\xBB\xBFname: tuned\n" + kBase + "data: {dataset: synthetic}\n");
}

BOOST_AUTO_TEST_CASE(what_the_text_cannot_take_is_an_error_naming_the_setting) {
  const TextEdit e = set_in_text(kBase, "test.yaml", {"model.layers.0.name=x", "name"});
  BOOST_REQUIRE(e.diagnostics.size() == 2u);
  BOOST_TEST(e.diagnostics[0].message ==
             "model.layers.0.name=x: model.layers is a sequence, not a mapping");
  BOOST_TEST(e.diagnostics[1].message == "name: expected key.path=value");
  BOOST_TEST(e.text == kBase);
}

BOOST_AUTO_TEST_SUITE_END()
