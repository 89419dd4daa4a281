// One test per validation rule: the rule fires with its exact message, and a config
// just inside the rule passes.
#include <boost/test/unit_test.hpp>

#include "config/layer_kinds.h"
#include "config/validate.h"
#include "tests/config/helpers.h"

using namespace popkit::config;
using namespace popkit::config::test;
namespace tt = boost::test_tools;

namespace {

std::string with_replication(const std::string& groupings, int factor) {
  return kBase + "replication:\n  factor: " + std::to_string(factor) + "\n  groupings:\n" +
         groupings;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rules)

BOOST_AUTO_TEST_CASE(version_must_be_1) {
  BOOST_TEST(errors("version: 2\nmodel: {layers: [{name: a, out_features: 10}]}\n") ==
                 Messages{"version: unsupported schema version 2; this popkit reads version 1"},
             tt::per_element());
}

// The name names the run's folder (runs/<name>/): nothing that leaves runs/, climbs out
// of it or shows as anything but itself.
BOOST_AUTO_TEST_CASE(name_is_a_folder_name) {
  const std::string rule =
      ": a run's name names its folder runs/<name>/, so it is ASCII letters, digits, '-', "
      "'_' and '.'";
  BOOST_TEST(
      errors(kBase + "name: ../../escaped\n") == Messages{"name: '../../escaped' holds '/'" + rule},
      tt::per_element());
  BOOST_TEST(errors(kBase + "name: /abs/dir\n") == Messages{"name: '/abs/dir' holds '/'" + rule},
             tt::per_element());
  BOOST_TEST(errors(kBase + "name: \"a\\0b\\x1b[2J\"\n") ==
                 Messages{"name: 'a\\x00b\\x1b[2J' holds '\\x00'" + rule},
             tt::per_element());
  for (const std::string dots : {".", ".."})
    BOOST_TEST(errors(kBase + "name: '" + dots + "'\n") ==
                   Messages{"name: '" + dots + "' names a folder that exists already, not a run" +
                            rule + ", but not '.' or '..' alone"},
               tt::per_element());
  BOOST_TEST(errors(kBase + "name: " + std::string(129, 'a') + "\n") ==
                 Messages{"name: 129 characters; a run's name is at most 128"},
             tt::per_element());
  for (const std::string& good :
       std::vector<std::string>{"mnist", "a.b-c_D9", "...", std::string(128, 'a')})
    BOOST_TEST(errors(kBase + "name: '" + good + "'\n").empty(), good);
}

BOOST_AUTO_TEST_CASE(factor_at_least_1_and_bounded) {
  BOOST_TEST(errors(kBase + "replication: {factor: 0}\n") ==
                 Messages{"replication.factor: must be >= 1, got 0"},
             tt::per_element());
  BOOST_TEST(errors(kBase + "replication: {factor: 65537}\n") ==
                 Messages{"replication.factor: must be <= 65536, got 65537"},
             tt::per_element());
  BOOST_TEST(errors(kBase + "replication: {factor: 65536}\n").empty());
}

BOOST_AUTO_TEST_CASE(grouping_stride_1_needs_factor_multiple_of_group_size) {
  BOOST_TEST(errors(with_replication("    g: {group_size: 3, stride: 1}\n", 16)) ==
                 Messages{"replication.groupings.g.group_size: replication.factor 16 % group_size "
                          "3 = 1, but stride 1 needs factor % group_size == 0"},
             tt::per_element());
  BOOST_TEST(errors(with_replication("    g: {group_size: 4, stride: 1}\n", 16)).empty());
}

BOOST_AUTO_TEST_CASE(grouping_stride_not_1_needs_stride_times_group_size_equal_factor) {
  BOOST_TEST(errors(with_replication("    g: {group_size: 4, stride: 3}\n", 16)) ==
                 Messages{"replication.groupings.g.stride: 3 × group_size 4 = 12, but stride != "
                          "1 needs stride × group_size == factor (16)"},
             tt::per_element());
  BOOST_TEST(errors(with_replication("    g: {group_size: 4, stride: 4}\n", 16)).empty());
}

BOOST_AUTO_TEST_CASE(grouping_sizes_at_least_1) {
  BOOST_TEST(errors(with_replication("    g: {group_size: 0, stride: -2}\n", 4)) ==
                 Messages({"replication.groupings.g.group_size: must be >= 1, got 0",
                           "replication.groupings.g.stride: must be >= 1, got -2"}),
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(grouping_product_overflow_is_caught) {
  BOOST_TEST(
      errors(with_replication("    g: {group_size: 4611686018427387904, stride: 4}\n", 16)) ==
          Messages{"replication.groupings.g.stride: 4 × group_size 4611686018427387904 = more "
                   "than 64 bits hold, but stride != 1 needs stride × group_size == factor (16)"},
      tt::per_element());
}

BOOST_AUTO_TEST_CASE(referenced_groupings_must_exist) {
  BOOST_TEST(errors(with_replication("    everyone: {group_size: 2}\n", 2) +
                    "variables: {grouping: everyon}\nsharding: {grouping: nobody}\n") ==
                 Messages({"variables.grouping: unknown grouping 'everyon'; did you mean "
                           "'everyone'?",
                           "sharding.grouping: unknown grouping 'nobody' (defined: everyone)"}),
             tt::per_element());
  BOOST_TEST(errors(kBase + "variables: {grouping: g}\n") ==
                 Messages{"variables.grouping: unknown grouping 'g' (replication.groupings "
                          "defines none)"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(sharding_with_factor_1_warns_and_is_ignored) {
  const auto result = load(kBase + "sharding: {threshold: 4}\n");
  BOOST_REQUIRE(result.ok());
  BOOST_TEST(messages(result, Severity::kWarning) ==
                 Messages{"sharding: replication.factor is 1, so there are no replicas to shard "
                          "across; sharding is ignored (as PopART does)"},
             tt::per_element());
  BOOST_TEST(!result.config->sharding.enabled);
  const auto on = load(kBase + "replication: {factor: 2}\nsharding:\n");
  BOOST_REQUIRE(on.ok());
  BOOST_TEST(on.config->sharding.enabled);
  BOOST_TEST(on.diagnostics.empty());
}

BOOST_AUTO_TEST_CASE(sharding_groups_nest_inside_variables_groups) {
  const std::string groupings =
      "    consecutive: {group_size: 4, stride: 1}\n    orthogonal: {group_size: 4, stride: "
      "4}\n    pairs: {group_size: 2}\n";
  BOOST_TEST(errors(with_replication(groupings, 16) +
                    "variables: {grouping: consecutive}\nsharding: {grouping: orthogonal}\n") ==
                 Messages{"sharding.grouping: the groups of sharding grouping 'orthogonal' must "
                          "nest inside those of variables grouping 'consecutive', but replicas 0 "
                          "and 4 share a sharding group and are in variables groups 0 and 1"},
             tt::per_element());
  BOOST_TEST(errors(with_replication(groupings, 16) +
                    "variables: {grouping: consecutive}\nsharding: {grouping: pairs}\n")
                 .empty());
  // Variables over all replicas: any sharding grouping nests.
  BOOST_TEST(
      errors(with_replication(groupings, 16) + "sharding: {grouping: orthogonal}\n").empty());
}

BOOST_AUTO_TEST_CASE(sharding_that_shards_nothing_warns) {
  BOOST_TEST(warnings(kBase + "replication: {factor: 2}\nsharding: {weights: false, "
                              "optimizer_state: false}\n") ==
                 Messages{"sharding: weights and optimizer_state are both false, so nothing is "
                          "sharded"},
             tt::per_element());
  BOOST_TEST(
      warnings(with_replication("    one: {group_size: 1}\n", 2) + "sharding: {grouping: one}\n") ==
          Messages{"sharding.grouping: grouping 'one' has groups of one replica, so every "
                   "tensor stays whole"},
      tt::per_element());
}

BOOST_AUTO_TEST_CASE(threshold_at_least_1) {
  BOOST_TEST(errors(kBase + "replication: {factor: 2}\nsharding: {threshold: 0}\n") ==
                 Messages{"sharding.threshold: must be >= 1, got 0"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(io_modes_need_io_tiles) {
  BOOST_TEST(errors(kBase + "execution: {io_mode: io}\n") ==
                 Messages{"execution.io_mode: io_mode io needs io_tiles > 0 (the tiles set aside "
                          "for IO), got 0"},
             tt::per_element());
  BOOST_TEST(errors(kBase + "execution: {io_mode: io_overlapped, io_tiles: 0}\n") ==
                 Messages{"execution.io_tiles: io_mode io_overlapped needs io_tiles > 0 (the "
                          "tiles set aside for IO), got 0"},
             tt::per_element());
  BOOST_TEST(errors(kBase + "execution: {io_mode: io, io_tiles: 8}\n").empty());
  BOOST_TEST(warnings(kBase + "execution: {io_tiles: 8}\n") ==
                 Messages{"execution.io_tiles: io_tiles 8 is ignored with io_mode compute"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(preload_needs_phased_mode_and_remote_weights) {
  BOOST_TEST(errors(kBase + "execution: {io_schedule: preload}\n") ==
                 Messages{"execution.io_schedule: preload loads the next phase's weights during "
                          "the current phase, so it needs execution.mode: phased; standard mode "
                          "runs one phase"},
             tt::per_element());
  BOOST_TEST(warnings(kBase + "execution: {mode: phased, io_schedule: preload}\n") ==
                 Messages{"execution.io_schedule: preload is ignored without remote.weights: "
                          "true (the weights stay on device, nothing is loaded)"},
             tt::per_element());
  const std::string fine =
      kBase + "remote: {weights: true}\nexecution: {mode: phased, io_schedule: preload}\n";
  BOOST_TEST(errors(fine).empty());
  BOOST_TEST(warnings(fine).empty());
}

BOOST_AUTO_TEST_CASE(remote_weights_need_phased_mode) {
  BOOST_TEST(errors(kBase + "remote: {weights: true}\n") ==
                 Messages{"remote.weights: remote weights need execution.mode: phased; standard "
                          "mode keeps the weights on device for the whole step"},
             tt::per_element());
  BOOST_TEST(errors(kBase + "remote: {weights: true}\nexecution: {mode: phased}\n").empty());
}

namespace {
std::string phased(const std::string& phases) {
  return kBase + "execution:\n  mode: phased\n  phases: " + phases + "\n";
}
}  // namespace

BOOST_AUTO_TEST_CASE(explicit_phases_accepted_when_executable) {
  const auto result = load(phased("[[fc1.forward], [fc2.forward, fc2.backward], [fc1.backward]]"));
  BOOST_REQUIRE_MESSAGE(result.ok(), text(result));
  const auto& phases = result.config->execution.phases;
  BOOST_TEST(!result.config->execution.phases_auto);
  BOOST_REQUIRE(phases.size() == 3u);
  BOOST_TEST(phases[1][1].layer == "fc2");
  BOOST_TEST((phases[1][1].pass == Pass::kBackward));
  // Several layers in one phase are fine as long as the order holds.
  BOOST_TEST(errors(phased("[[fc1.forward, fc2.forward, fc2.backward, fc1.backward]]")).empty());
}

BOOST_AUTO_TEST_CASE(explicit_phases_cover_every_item_exactly_once) {
  BOOST_TEST(errors(phased("[[fc1.forward], [fc2.forward, fc2.backward]]")) ==
                 Messages{"execution.phases: fc1.backward is missing; every layer's forward and "
                          "backward must appear exactly once"},
             tt::per_element());
  BOOST_TEST(errors(phased("[[fc1.forward, fc1.forward], [fc2.forward, fc2.backward], "
                           "[fc1.backward]]")) ==
                 Messages{"execution.phases[0][1]: fc1.forward appears twice (first at "
                          "execution.phases[0][0]); each layer's forward and backward run exactly "
                          "once"},
             tt::per_element());
  BOOST_TEST(errors(phased("[[fc1.forward], [fc3.forward, fc2.forward, fc2.backward], "
                           "[fc1.backward]]")) ==
                 Messages{"execution.phases[1][0]: no layer named 'fc3'; did you mean 'fc1'?"},
             tt::per_element());
  BOOST_TEST(errors(phased("[[fc1.forward], [], [fc2.forward, fc2.backward], [fc1.backward]]")) ==
                 Messages{"execution.phases[1]: a phase needs at least one item"},
             tt::per_element());
  BOOST_TEST(errors(phased("[[fc1.fwd], [fc2.forward, fc2.backward], [fc1.backward]]")) ==
                 Messages{"execution.phases[0][0]: unknown value 'fwd' (one of forward, "
                          "backward)"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(explicit_phases_run_in_an_executable_order) {
  BOOST_TEST(errors(phased("[[fc2.forward], [fc1.forward], [fc2.backward], [fc1.backward]]")) ==
                 Messages({"execution.phases[0][0]: fc2.forward runs before fc1.forward; "
                           "forwards run in layer order",
                           "execution.phases[2][0]: fc2.backward must directly follow "
                           "fc2.forward in the same phase (the last layer's forward, loss and "
                           "backward run together)"}),
             tt::per_element());
  BOOST_TEST(errors(phased("[[fc1.forward], [fc1.backward], [fc2.forward, fc2.backward]]")) ==
                 Messages{"execution.phases[1][0]: fc1.backward runs before fc2.backward; "
                          "backwards run in reverse layer order"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(explicit_phases_need_phased_mode) {
  BOOST_TEST(errors(kBase + "execution: {phases: [[fc1.forward]]}\n") ==
                 Messages{"execution.phases: explicit phases need execution.mode: phased; "
                          "standard mode runs one phase"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(training_ranges) {
  BOOST_TEST(
      errors(kBase + "training: {micro_batch_size: 0, gradient_accumulation: -1, epochs: "
                     "0}\n") == Messages({"training.micro_batch_size: must be >= 1, got 0",
                                          "training.gradient_accumulation: must be >= 1, got -1",
                                          "training.epochs: must be >= 1, got 0"}),
      tt::per_element());
  BOOST_TEST(errors(kBase + "training: {epochs: 1, steps: 10}\n") ==
                 Messages{"training.steps: give training.epochs or training.steps, not both"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(samples_per_step_must_not_overflow) {
  BOOST_TEST(errors(kBase + "replication: {factor: 4}\ntraining: {micro_batch_size: "
                            "4611686018427387904, gradient_accumulation: 1}\n") ==
                 Messages{"training.micro_batch_size: micro_batch_size 4611686018427387904 × "
                          "gradient_accumulation 1 × replication.factor 4 (the samples of one "
                          "optimizer step) overflows 64 bits"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(optimizer_ranges) {
  BOOST_TEST(errors(kBase + "training:\n  optimizer: {lr: 0, beta1: 1, beta2: -0.1, eps: 0, "
                            "weight_decay: -1}\n") ==
                 Messages({"training.optimizer.lr: must be a finite number > 0, got 0",
                           "training.optimizer.beta1: must be in [0, 1), got 1",
                           "training.optimizer.beta2: must be in [0, 1), got -0.1",
                           "training.optimizer.eps: must be a finite number > 0, got 0",
                           "training.optimizer.weight_decay: must be a finite number >= 0, got "
                           "-1"}),
             tt::per_element());
  BOOST_TEST(errors(kBase + "training: {optimizer: {lr: .nan}}\n") ==
                 Messages{"training.optimizer.lr: must be a finite number > 0, got nan"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(layers_rules) {
  BOOST_TEST(errors("version: 1\nmodel: {layers: [{name: 1a, out_features: 4}, {name: b, "
                    "out_features: 10}, {name: b, out_features: 10}]}\n") ==
                 Messages({"model.layers[0].name: '1a' is not a name: use letters, digits and _, "
                           "not starting with a digit",
                           "model.layers[2].name: 'b' is already the name of model.layers[1]; "
                           "layer names must be unique"}),
             tt::per_element());
  BOOST_TEST(errors("version: 1\nmodel: {layers: []}\n") ==
                 Messages{"model.layers: needs at least one layer"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(input_shape_rules) {
  BOOST_TEST(errors(kBase + "  input_shape: [28, 0]\n") ==
                 Messages{"model.input_shape[1]: a dimension must be >= 1, got 0"},
             tt::per_element());
  BOOST_TEST(errors(kBase + "  input_shape: []\n") ==
                 Messages{"model.input_shape: needs at least one dimension"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(mnist_needs_784_inputs_and_10_classes) {
  BOOST_TEST(errors("version: 1\nmodel:\n  input_shape: [32, 32]\n  layers: [{name: a, "
                    "out_features: 12}]\n") ==
                 Messages({"model.input_shape: dataset mnist has images of 28 × 28 pixels, so "
                           "the input shape must be [28, 28], got [32, 32]",
                           "model.layers[0].out_features: dataset mnist has 10 classes, but the "
                           "last layer 'a' has out_features 12"}),
             tt::per_element());
  BOOST_TEST(errors("version: 1\nmodel:\n  input_shape: [32, 32]\n  layers: [{name: a, "
                    "out_features: 12}]\ndata: {dataset: synthetic}\n")
                 .empty());
  // The same 784 pixels in another shape are not the files' images: the engine reads
  // 28 rows of 28, so [784] or [1, 784] would be refused only once the data is loaded.
  for (const std::string shape : {"[784]", "[1, 784]", "[28, 28, 1]"}) {
    BOOST_TEST(
        errors("version: 1\nmodel:\n  input_shape: " + shape +
               "\n  layers: [{name: a, out_features: 10}]\ndata: {dataset: fashion-mnist}\n") ==
            Messages({"model.input_shape: dataset fashion-mnist has images of 28 × 28 "
                      "pixels, so the input shape must be [28, 28], got " +
                      shape}),
        tt::per_element());
  }
}

BOOST_AUTO_TEST_CASE(init_std_positive) {
  BOOST_TEST(errors(kBase + "  init: {weights: {normal: {std: 0}}}\n") ==
                 Messages{"model.init.weights.normal.std: must be a finite number > 0, got 0"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(idx_needs_its_four_files) {
  BOOST_TEST(errors(kBase + "data: {dataset: idx, train_images: a, train_labels: b, test_images: "
                            "c}\n") ==
                 Messages{"data.dataset: dataset idx needs data.test_labels (a path to an IDX "
                          "file)"},
             tt::per_element());
  BOOST_TEST(warnings(kBase + "data: {train_images: a}\n") ==
                 Messages{"data.train_images: only used with dataset: idx; ignored with dataset "
                          "mnist"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(synthetic_ranges) {
  BOOST_TEST(errors(kBase + "data: {dataset: synthetic, synthetic_train: 0, synthetic_noise: "
                            "-1}\n") ==
                 Messages({"data.synthetic_train: must be >= 1, got 0",
                           "data.synthetic_noise: must be a finite number >= 0, got -1"}),
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(eval_and_device) {
  BOOST_TEST(errors(kBase + "eval: {micro_batch_size: -1}\ndevice: {profile: ipu-mk3}\n") ==
                 Messages({"eval.micro_batch_size: must be >= 0, got -1",
                           "device.profile: unknown device profile 'ipu-mk3'; did you mean "
                           "'ipu-mk1'? (known: cpu, ipu-mk1, ipu-mk2; or give a profile file's "
                           "path)"}),
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(one_typo_gives_one_error) {
  // factor fails to load, so the rules that use it (groupings, sharding) stay quiet.
  BOOST_TEST(errors(with_replication("    g: {group_size: 3}\n", 16) + "sharding: {grouping: g}\n",
                    {"replication.factor=two"}) ==
                 Messages{"replication.factor: expected an integer, got 'two'"},
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(configs_built_in_code_are_validated_too) {
  Config config;
  config.model.layers = {make_layer("fc1", "linear", {{"out_features", 10}})};
  config.replication.factor = 16;
  config.replication.groupings = {{"g", 4, 3}};
  const auto diagnostics = validate_config(config);
  BOOST_REQUIRE(diagnostics.size() == 1u);
  BOOST_TEST(diagnostics[0].file == "");
  BOOST_TEST(diagnostics[0].line == 0);
  BOOST_TEST(diagnostics[0].message ==
             "replication.groupings.g.stride: 3 × group_size 4 = 12, but stride != 1 needs "
             "stride × group_size == factor (16)");
}

// pipeline: every layer on exactly one stage, in model order; S <= layers; standard
// mode without io_overlapped; gradient_accumulation >= 2 x stages (issue 16).
BOOST_AUTO_TEST_CASE(pipeline_placement_covers_every_layer_once_in_order) {
  const std::string three = R"(version: 1
model:
  layers:
    - {name: fc1, out_features: 16, activation: relu}
    - {name: fc2, out_features: 16, activation: relu}
    - {name: fc3, out_features: 10}
training: {gradient_accumulation: 6}
)";
  BOOST_TEST(errors(three + "pipeline: {placement: [[fc1], [fc2, fc3]]}\n").empty());
  BOOST_TEST(errors(three + "pipeline: {stages: 3, placement: auto}\n").empty());
  BOOST_TEST(errors(three + "pipeline: {placement: [[fc1], [fc3], [fc2]]}\n") ==
                 Messages{"pipeline.placement[1][0]: fc3 is placed where model.layers has fc2; a "
                          "placement lists the layers in model order, each stage a contiguous "
                          "run (the activations flow from stage to stage)"},
             tt::per_element());
  BOOST_TEST(errors(three + "pipeline: {placement: [[fc1, fc2], [fc2, fc3]]}\n") ==
                 Messages{"pipeline.placement[1][0]: fc2 is placed twice (first at "
                          "pipeline.placement[0][1]); every layer goes on exactly one stage"},
             tt::per_element());
  BOOST_TEST(errors(three + "pipeline: {placement: [[fc1], [fc2]]}\n") ==
                 Messages{"pipeline.placement: fc3 is not placed; every layer goes on exactly "
                          "one stage"},
             tt::per_element());
  BOOST_TEST(errors(three + "pipeline: {placement: [[fc1], [fx2, fc3]]}\n") ==
                 Messages{"pipeline.placement[1][0]: unknown layer 'fx2'; did you mean 'fc2'?"},
             tt::per_element());
  BOOST_TEST(errors(three + "pipeline: {placement: [[fc1], [], [fc2, fc3]]}\n") ==
                 Messages{"pipeline.placement[1]: a stage needs at least one layer"},
             tt::per_element());
  BOOST_TEST(errors(three + "pipeline: {stages: 2, placement: [[fc1], [fc2], [fc3]]}\n") ==
                 Messages{"pipeline.stages: is 2 but pipeline.placement lists 3 stages"},
             tt::per_element());
  BOOST_TEST(errors(three + "pipeline: {stages: 4}\n") ==
                 Messages{"pipeline.stages: 4 stages but model.layers has 3 layers; each stage "
                          "needs at least one"},
             tt::per_element());
  BOOST_TEST(
      errors(three + "pipeline: {stages: 0}\n") == Messages{"pipeline.stages: must be >= 1, got 0"},
      tt::per_element());
}

BOOST_AUTO_TEST_CASE(pipeline_needs_standard_mode_and_enough_accumulation) {
  BOOST_TEST(errors(kBase + "pipeline: {stages: 2}\ntraining: {gradient_accumulation: 3}\n") ==
                 Messages{"training.gradient_accumulation: 2 pipeline stages need "
                          "training.gradient_accumulation >= 2 x stages = 4, got 3: with fewer "
                          "micro-batches per step the pipeline's ramp-up and ramp-down are "
                          "longer than its main phase, where every stage works (PopART's "
                          "pipelining rule); raise gradient_accumulation to 4 or use fewer "
                          "stages"},
             tt::per_element());
  BOOST_TEST(
      errors(kBase + "pipeline: {stages: 2}\ntraining: {gradient_accumulation: 4}\n").empty());
  // A pipelined step's schedule lists its micro-batches: at most 65,536 of them.
  BOOST_TEST(errors(kBase + "pipeline: {stages: 2}\ntraining: {gradient_accumulation: 65537}\n") ==
                 Messages{"training.gradient_accumulation: 2 pipeline stages run "
                          "training.gradient_accumulation 65537 micro-batches a step, more than "
                          "65536: the step's schedule lists every micro-batch of every stage; use "
                          "a larger micro_batch_size or no pipeline"},
             tt::per_element());
  const std::string ga4 = "training: {gradient_accumulation: 4}\n";
  BOOST_TEST(errors(kBase + ga4 + "pipeline: {stages: 2}\nexecution: {mode: phased}\n") ==
                 Messages{"pipeline.stages: 2 pipeline stages need execution.mode: standard; "
                          "phased execution already spreads the layers over time on one "
                          "device, and phases inside stages are not supported "
                          "(docs/pipelining.md)"},
             tt::per_element());
  BOOST_TEST(errors(kBase + ga4 +
                    "pipeline: {stages: 2}\nexecution: {io_mode: io_overlapped, io_tiles: 8}\n") ==
                 Messages{"execution.io_mode: io_overlapped double-buffers the streams of a "
                          "repeat loop, and a pipelined stage runs its micro-batches unrolled "
                          "in 1F1B order, without one; use io or compute"},
             tt::per_element());
  // One stage is no pipelining: nothing to require.
  BOOST_TEST(errors(kBase + "pipeline: {stages: 1}\nexecution: {mode: phased}\n").empty());
}

BOOST_AUTO_TEST_CASE(sync_pattern_must_serve_the_devices) {
  BOOST_TEST(
      errors(kBase + "replication: {factor: 2}\nexecution: {sync_pattern: single_pipeline}\n") ==
          Messages{"execution.sync_pattern: single_pipeline serves one pipeline, whose "
                   "devices do their host IO without waiting for each other; "
                   "replication.factor 2 runs 2 pipelines, whose replicas sync at every "
                   "collective: use full or replica_and_ladder"},
      tt::per_element());
  BOOST_TEST(
      errors(kBase + "replication: {factor: 3}\nexecution: {sync_pattern: replica_and_ladder}\n") ==
          Messages{"execution.sync_pattern: replica_and_ladder alternates IO between two "
                   "equal ladder sets (the even and the odd devices), and "
                   "replication.factor 3 x 1 stage = 3 devices do not split in two; use "
                   "full, or an even device count"},
      tt::per_element());
  BOOST_TEST(errors(kBase + "replication: {factor: 3}\nexecution: {sync_pattern: full}\n").empty());
  // The default: replica_and_ladder when phased and the devices split in two, else full.
  auto pattern = [](const std::string& yaml) {
    LoadResult r = load(yaml);
    BOOST_REQUIRE(r.config);
    return sync_pattern(*r.config);
  };
  BOOST_TEST((pattern(kBase + "replication: {factor: 2}\nexecution: {mode: phased}\n") ==
              SyncPattern::kReplicaAndLadder));
  BOOST_TEST((pattern(kBase + "replication: {factor: 3}\nexecution: {mode: phased}\n") ==
              SyncPattern::kFull));
  BOOST_TEST((pattern(kBase + "replication: {factor: 2}\n") == SyncPattern::kFull));
}

BOOST_AUTO_TEST_SUITE_END()
