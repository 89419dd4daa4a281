// The loader: YAML typing, positions, keys, and the guards against hostile input.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>

#include "tests/config/helpers.h"

using namespace popkit::config;
using namespace popkit::config::test;

BOOST_AUTO_TEST_SUITE(loader)

BOOST_AUTO_TEST_CASE(minimal_config_gets_documented_defaults) {
  const auto result = load(kBase);
  BOOST_REQUIRE(result.ok());
  BOOST_TEST(result.diagnostics.empty());
  const Config& c = *result.config;
  BOOST_TEST(c.model.layers.size() == 2u);
  BOOST_TEST(c.model.layers[0].name == "fc1");
  BOOST_TEST(c.model.layers[0].type == "linear");
  BOOST_TEST(c.model.layers[0].attributes.integer("out_features") == 16);
  BOOST_TEST(c.model.layers[0].attributes.name("activation") == "relu");
  // A key left out holds its kind's default (config/layer_kinds.h).
  BOOST_TEST(c.model.layers[1].attributes.name("activation") == "none");
  BOOST_TEST(c.replication.factor == 1);
  BOOST_TEST(!c.sharding.enabled);
  BOOST_TEST((c.execution.mode == ExecutionMode::kStandard));
  BOOST_TEST(c.execution.phases_auto);
  BOOST_TEST(c.training.micro_batch_size == 1);
  BOOST_TEST(!c.training.epochs.has_value());
  BOOST_TEST(c.device.profile == "ipu-mk2");
}

BOOST_AUTO_TEST_CASE(every_section_is_read) {
  const auto result = load(kBase + R"(
  init: {weights: {normal: {mean: 0.5, std: 0.25}}, biases: normal, seed: 7}
  init_from: start.safetensors
replication:
  factor: 4
  groupings:
    pairs: {group_size: 2}
    across: {group_size: 2, stride: 2}
variables: {grouping: pairs, retrieval_mode: all_replicas}
sharding: {threshold: 8, grouping: pairs, weights: false}
remote: {optimizer_state: true}
execution: {mode: phased, io_mode: io_overlapped, io_tiles: 16}
training:
  micro_batch_size: 3
  gradient_accumulation: 5
  steps: 100
  optimizer: {lr: 0.5, beta1: 0, beta2: 0.5, eps: 1e-8, weight_decay: 0.01, bias_correction: true, first_order_dtype: float16}
  seed: 18446744073709551615
data: {dataset: fashion-mnist, shuffle: false, dir: /data}
eval: {micro_batch_size: 64, every: 2}
device: {profile: cpu, memory_per_replica: 1.5GB}
)");
  BOOST_REQUIRE_MESSAGE(result.ok(), text(result));
  const Config& c = *result.config;
  BOOST_TEST(c.model.init.weights_mean == 0.5);
  BOOST_TEST(c.model.init.weights_std == 0.25);
  BOOST_TEST(!c.model.init.biases_zero);
  BOOST_TEST(c.model.init.seed == 7u);
  BOOST_TEST(c.model.init_from == "start.safetensors");
  BOOST_TEST(c.replication.factor == 4);
  BOOST_REQUIRE(c.replication.groupings.size() == 2u);
  BOOST_TEST(c.replication.groupings[1].name == "across");
  BOOST_TEST(c.replication.groupings[1].stride == 2);
  BOOST_TEST((c.variables.retrieval_mode == RetrievalMode::kAllReplicas));
  BOOST_TEST(c.sharding.enabled);
  BOOST_TEST(c.sharding.threshold == 8);
  BOOST_TEST(!c.sharding.weights);
  BOOST_TEST(c.sharding.optimizer_state);
  BOOST_TEST(c.remote.optimizer_state);
  BOOST_TEST((c.execution.io_mode == IoMode::kIoOverlapped));
  BOOST_TEST(c.training.steps.value() == 100);
  BOOST_TEST(c.training.optimizer.attributes.number("eps") == 1e-8);
  BOOST_TEST(c.training.optimizer.attributes.boolean("bias_correction"));
  BOOST_TEST(c.training.optimizer.attributes.name("first_order_dtype") == "float16");
  BOOST_TEST(c.training.optimizer.attributes.number("beta1") == 0.0);
  BOOST_TEST(c.training.seed == 18446744073709551615u);
  BOOST_TEST((c.data.dataset == Dataset::kFashionMnist));
  BOOST_TEST(c.eval.every == 2);
  BOOST_TEST(c.device.memory_per_replica == 1500000000u);
}

BOOST_AUTO_TEST_CASE(errors_carry_line_and_column) {
  const auto result = load(kBase + "training:\n  micro_batch_size: eight\n");
  BOOST_REQUIRE(result.diagnostics.size() == 1u);
  const Diagnostic& d = result.diagnostics[0];
  BOOST_TEST(d.file == "test.yaml");
  BOOST_TEST(d.line == 7);
  BOOST_TEST(d.column == 21);
  BOOST_TEST(d.message == "training.micro_batch_size: expected an integer, got 'eight'");
}

BOOST_AUTO_TEST_CASE(quoted_numbers_are_strings) {
  BOOST_TEST(errors(kBase + "training: {micro_batch_size: \"8\"}\n") ==
                 Messages{"training.micro_batch_size: expected an integer, got the string \"8\""},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(numbers_beyond_64_bits_are_errors) {
  BOOST_TEST(errors(kBase + "replication: {factor: 18446744073709551616}\n") ==
                 Messages{"replication.factor: 18446744073709551616 does not fit in a 64-bit "
                          "integer"},
             boost::test_tools::per_element());
  BOOST_TEST(errors(kBase + "training: {seed: 18446744073709551616}\n") ==
                 Messages{"training.seed: 18446744073709551616 does not fit in a 64-bit "
                          "unsigned integer"},
             boost::test_tools::per_element());
  BOOST_TEST(errors(kBase + "training: {optimizer: {lr: 1e999}}\n") ==
                 Messages{"training.optimizer.lr: 1e999 is out of the range of a double"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(yaml_1_1_booleans_are_rejected_with_a_reason) {
  BOOST_TEST(errors(kBase + "data: {shuffle: yes}\n") ==
                 Messages{"data.shuffle: expected true or false, got 'yes' (YAML 1.2 reads "
                          "yes/no/on/off as strings)"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(unknown_keys_get_a_suggestion_or_the_list) {
  BOOST_TEST(errors(kBase + "trainig: {}\n") ==
                 Messages{"unknown key 'trainig'; did you mean 'training'?"},
             boost::test_tools::per_element());
  BOOST_TEST(errors(kBase + "remote: {zzz: true}\n") ==
                 Messages{"remote: unknown key 'zzz' (known keys: weights, optimizer_state)"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_errors_with_a_note) {
  const auto result = load(kBase + "eval:\n  every: 1\n  every: 2\n");
  BOOST_REQUIRE(result.diagnostics.size() == 2u);
  BOOST_TEST(result.diagnostics[0].message ==
             "eval.every: duplicate key; it is already set at line 7");
  BOOST_TEST(result.diagnostics[0].line == 8);
  BOOST_TEST((result.diagnostics[1].severity == Severity::kNote));
  BOOST_TEST(result.diagnostics[1].line == 7);
}

BOOST_AUTO_TEST_CASE(required_keys) {
  BOOST_TEST(errors("model: {layers: [{name: a, out_features: 10}]}\n") ==
                 Messages{"version: required key is missing"},
             boost::test_tools::per_element());
  BOOST_TEST(errors("version: 1\nmodel: {layers: [{name: a}]}\n") ==
                 Messages{"model.layers[0].out_features: required key is missing"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(top_level_must_be_a_mapping) {
  BOOST_TEST(errors("") == Messages{"the config is empty; it needs at least version: 1 and "
                                    "model.layers"},
             boost::test_tools::per_element());
  BOOST_TEST(errors("- a\n- b\n") ==
                 Messages{"config: expected a mapping of sections (version, model, ...), got a "
                          "sequence"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(aliases_are_followed) {
  const auto result = load(
      "version: 1\nmodel:\n  layers:\n    - &l {name: fc1, out_features: 10}\n"
      "training: {micro_batch_size: &n 4, gradient_accumulation: *n}\n");
  BOOST_REQUIRE_MESSAGE(result.ok(), text(result));
  BOOST_TEST(result.config->training.gradient_accumulation == 4);
}

BOOST_AUTO_TEST_CASE(alias_bomb_is_stopped) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += (k ? ", *a" : "*a") + std::to_string(i - 1);
    yaml += "]\n";
  }
  const auto result = load(yaml);
  BOOST_REQUIRE(result.diagnostics.size() == 1u);
  BOOST_TEST(result.diagnostics[0].message.find("expands to more than 100000 nodes") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(deep_nesting_is_stopped) {
  const auto result = load("version: 1\nx: " + std::string(200, '[') + std::string(200, ']'));
  BOOST_REQUIRE(result.diagnostics.size() == 1u);
  BOOST_TEST(result.diagnostics[0].message ==
             "nesting deeper than 64 levels; a config needs a handful");
}

BOOST_AUTO_TEST_CASE(tabs_in_indentation_are_reported_on_every_line) {
  const auto result = load("version: 1\nmodel:\n\tlayers: []\n \tloss: x\n");
  BOOST_REQUIRE(result.diagnostics.size() == 2u);
  BOOST_TEST(result.diagnostics[0].line == 3);
  BOOST_TEST(result.diagnostics[1].line == 4);
  BOOST_TEST(result.diagnostics[1].column == 2);
  BOOST_TEST(result.diagnostics[0].message ==
             "tab character in indentation; YAML indents with spaces");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_reported_at_its_byte) {
  const auto result = load("version: 1\nname: caf\xE9\n");
  BOOST_REQUIRE(result.diagnostics.size() == 1u);
  BOOST_TEST(result.diagnostics[0].line == 2);
  BOOST_TEST(result.diagnostics[0].column == 10);
  BOOST_TEST(result.diagnostics[0].message ==
             "byte 0xE9 is not valid UTF-8; a config must be UTF-8 text");
  BOOST_TEST(load("version: 1\nmodel: {init_from: caf\xC3\xA9.safetensors, layers: [{name: a, "
                  "out_features: 10}]}\n")
                 .ok());
}

BOOST_AUTO_TEST_CASE(syntax_errors_point_at_the_problem) {
  const auto result = load("version: 1\nmodel: {layers: [}\n");
  BOOST_REQUIRE(result.diagnostics.size() == 1u);
  BOOST_TEST(result.diagnostics[0].line == 2);
  BOOST_TEST(result.diagnostics[0].message.rfind("YAML syntax: ", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(a_second_document_is_an_error) {
  BOOST_TEST(errors(kBase + "---\nversion: 1\n") ==
                 Messages{"a second YAML document; a config file holds exactly one"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(missing_file_and_directory) {
  const auto missing = load_config_file("/nonexistent/popkit.yaml");
  BOOST_REQUIRE(missing.diagnostics.size() == 1u);
  BOOST_TEST(missing.diagnostics[0].message == "no such file");
  BOOST_TEST(missing.diagnostics[0].line == 0);
  const auto directory = load_config_file(POPKIT_SOURCE_DIR "/examples");
  BOOST_REQUIRE(directory.diagnostics.size() == 1u);
  BOOST_TEST(directory.diagnostics[0].message ==
             "is a directory; give the path of a YAML config file");
}

BOOST_AUTO_TEST_CASE(the_config_loader_refuses_a_fifo_and_a_device) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("popkit-loader-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string fifo = (dir / "config.yaml").string();
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    const auto result = load_config_file(path, {});
    BOOST_REQUIRE(result.diagnostics.size() == 1u);
    BOOST_TEST(result.diagnostics[0].message.rfind("is not a regular file (a ", 0) == 0);
    BOOST_TEST(result.diagnostics[0].message.find("; give the path of a YAML config file") !=
               std::string::npos);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(diagnostics_come_in_source_order) {
  const auto result = load(
      "version: 1\nmodel:\n  layers: [{name: a, out_features: 0}]\n"
      "training: {micro_batch_size: 0}\nreplication: {factor: 0}\n");
  BOOST_REQUIRE(result.diagnostics.size() == 3u);
  BOOST_TEST(result.diagnostics[0].line == 3);
  BOOST_TEST(result.diagnostics[1].line == 4);
  BOOST_TEST(result.diagnostics[2].line == 5);
}

BOOST_AUTO_TEST_SUITE_END()
