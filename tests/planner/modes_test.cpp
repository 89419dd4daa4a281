// Standard mode, the off-chip optimizer, io_overlapped double buffers, the three ways
// a sharded weight or state is updated, and reductions inside variable groups.
#include <boost/test/unit_test.hpp>

#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/build.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"
#include "tests/planner/configs.h"
#include "tests/planner/helpers.h"

using namespace popkit::planner;
using Lines = std::vector<std::string>;

namespace {

// `want` appears in `ops` as a run of consecutive lines, from the first line equal to
// want[0] on.
void expect_run(const Lines& ops, const Lines& want) {
  const auto first = std::find(ops.begin(), ops.end(), want[0]);
  BOOST_REQUIRE(first != ops.end());
  BOOST_REQUIRE(ops.end() - first >= static_cast<std::ptrdiff_t>(want.size()));
  const Lines got(first, first + static_cast<std::ptrdiff_t>(want.size()));
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

}  // namespace

namespace {
bool has(const Lines& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(modes)

BOOST_AUTO_TEST_CASE(standard_mode_is_one_phase_with_everything_on_device) {
  const Plan p = build_plan(test::tiny_standard());
  BOOST_TEST(p.phases.size() == 1u);
  BOOST_TEST(p.phases[0].name == "forward+loss+backward+optimizer");
  BOOST_TEST(p.buffers.empty());
  const Lines setup{"alloc fc.weight", "alloc fc.weight.adam_m", "alloc fc.weight.adam_v",
                    "alloc fc.bias",   "alloc fc.bias.adam_m",   "alloc fc.bias.adam_v"};
  BOOST_TEST(test::op_lines(p.setup) == setup, boost::test_tools::per_element());
  const Lines want{"alloc images",
                   "alloc fc.out",
                   "alloc labels",
                   "alloc loss",
                   "alloc fc.weight.grad",
                   "alloc fc.bias.grad",
                   "alloc forward+loss+backward+optimizer.workspace",
                   "repeat 2 steps",
                   "  host_load images -> images",
                   "  forward fc",
                   "  host_load labels -> labels",
                   "  loss softmax_cross_entropy",
                   "  host_store loss -> host",
                   "  backward fc",
                   "free forward+loss+backward+optimizer.workspace",
                   "free images",
                   "free fc.out",
                   "free labels",
                   "free loss",
                   "all_reduce fc.weight.grad (mean)",
                   "optimizer_step adam fc.weight",
                   "free fc.weight.grad",
                   "all_reduce fc.bias.grad (mean)",
                   "optimizer_step adam fc.bias",
                   "free fc.bias.grad"};
  BOOST_TEST(test::op_lines(p.phases[0].ops) == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(standard_mode_runs_all_layers_in_one_loop) {
  auto c = test::mnist_phased();
  c.execution.mode = popkit::config::ExecutionMode::kStandard;
  c.remote = {false, false};
  const Plan p = build_plan(c);
  BOOST_TEST(p.phases.size() == 1u);
  const Lines body = test::op_lines(test::repeat_of(p.phases[0]).body);
  const Lines computes{"  forward fc1",
                       "  forward fc2",
                       "  forward fc3",
                       "  forward fc4",
                       "  loss softmax_cross_entropy",
                       "  backward fc4",
                       "  backward fc3",
                       "  backward fc2",
                       "  backward fc1"};
  Lines got;
  for (const auto& l : body)
    if (l.rfind("forward", 0) == 0 || l.rfind("backward", 0) == 0 || l.rfind("loss", 0) == 0)
      got.push_back("  " + l);
  BOOST_TEST(got == computes, boost::test_tools::per_element());
  // fc2 and fc3 are both in the phase: their tensors carry the layer names.
  BOOST_TEST(test::tensor_index(p, "fc2.out") != test::tensor_index(p, "fc3.out"));
  // Sharded variables live on device as shards, always live.
  BOOST_TEST(
      p.tensors[static_cast<std::size_t>(test::tensor_index(p, "fc1.weight.shard"))].always_live);
  BOOST_TEST(p.buffers.empty());
}

BOOST_AUTO_TEST_CASE(off_chip_optimizer_loads_updates_and_stores_the_state) {
  auto c = test::tiny_standard();
  c.remote.optimizer_state = true;
  const Plan p = build_plan(c);
  BOOST_TEST(p.phases.size() == 2u);
  BOOST_TEST(p.phases[0].name == "forward+loss+backward");
  BOOST_TEST(p.phases[1].name == "optimizer");
  const Lines setup{"alloc fc.weight", "alloc fc.bias"};
  BOOST_TEST(test::op_lines(p.setup) == setup, boost::test_tools::per_element());
  const Lines opt{"all_reduce fc.weight.grad (mean)",
                  "alloc fc.weight.adam_m",
                  "remote_load fc.weight.adam_m[0] -> fc.weight.adam_m",
                  "alloc fc.weight.adam_v",
                  "remote_load fc.weight.adam_v[0] -> fc.weight.adam_v",
                  "optimizer_step adam fc.weight",
                  "free fc.weight.grad",
                  "remote_store fc.weight.adam_m -> fc.weight.adam_m[0]",
                  "free fc.weight.adam_m",
                  "remote_store fc.weight.adam_v -> fc.weight.adam_v[0]",
                  "free fc.weight.adam_v",
                  "all_reduce fc.bias.grad (mean)",
                  "alloc fc.bias.adam_m",
                  "remote_load fc.bias.adam_m[0] -> fc.bias.adam_m",
                  "alloc fc.bias.adam_v",
                  "remote_load fc.bias.adam_v[0] -> fc.bias.adam_v",
                  "optimizer_step adam fc.bias",
                  "free fc.bias.grad",
                  "remote_store fc.bias.adam_m -> fc.bias.adam_m[0]",
                  "free fc.bias.adam_m",
                  "remote_store fc.bias.adam_v -> fc.bias.adam_v[0]",
                  "free fc.bias.adam_v"};
  BOOST_TEST(test::op_lines(p.phases[1].ops) == opt, boost::test_tools::per_element());
  // The gradients stay on device between the two phases.
  const Lines first = test::op_lines(p.phases[0].ops);
  BOOST_TEST(!has(first, "free fc.weight.grad"));
  // Memory: always live W 48 + b 12; phase 1 adds images 32, out 24 (the loss writes
  // dlogits over it), labels 8, loss 4, grads 60 and the GEMMs' workspace 128
  // (memory_test.cpp); phase 2 peaks with grads 60 + adam_m 48 + adam_v 48.
  BOOST_TEST(p.phases[0].memory.peak == 316u);
  BOOST_TEST(p.phases[1].memory.peak == 216u);
  BOOST_TEST(p.peak_phase == 0);
  BOOST_TEST(p.streaming_bytes == 2u * (48u + 12u));
}

BOOST_AUTO_TEST_CASE(io_overlapped_double_buffers_every_streamed_tensor) {
  auto c = test::tiny_standard();
  c.execution.io_mode = popkit::config::IoMode::kIoOverlapped;
  c.execution.io_tiles = 1;
  const Plan p = build_plan(c);
  BOOST_TEST((test::repeat_of(p.phases[0]).io_mode == IoMode::kIoOverlapped));
  BOOST_TEST(p.warnings.empty());
  for (const char* name : {"images", "labels", "loss"}) {
    const DeviceTensor& t = p.tensors[static_cast<std::size_t>(test::tensor_index(p, name))];
    BOOST_REQUIRE(t.double_buffer >= 0);
    BOOST_TEST(p.tensors[static_cast<std::size_t>(t.double_buffer)].name ==
               std::string(name) + ".slot1");
  }
  BOOST_TEST(p.tensors[static_cast<std::size_t>(test::tensor_index(p, "fc.out"))].double_buffer ==
             -1);
  const Lines ops = test::op_lines(p.phases[0].ops);
  BOOST_TEST(has(ops, "alloc images.slot1"));
  BOOST_TEST(has(ops, "free images.slot1"));
  // Two slots of images (32), labels (8) and loss (4): 44 bytes over the io plan's 436.
  BOOST_TEST(p.peak_bytes == 480u);
}

BOOST_AUTO_TEST_CASE(io_overlapped_with_one_step_falls_back_to_io) {
  auto c = test::tiny_standard();
  c.execution.io_mode = popkit::config::IoMode::kIoOverlapped;
  c.training.gradient_accumulation = 1;
  const Plan p = build_plan(c);
  BOOST_TEST((p.io_mode == IoMode::kIo));
  BOOST_TEST((test::repeat_of(p.phases[0]).io_mode == IoMode::kIo));
  BOOST_REQUIRE(p.warnings.size() == 1u);
  BOOST_TEST(p.warnings[0] ==
             "execution.io_mode: io_overlapped needs at least 2 steps per repeat loop, but "
             "training.gradient_accumulation is 1; using io");
  for (const auto& t : p.tensors) BOOST_TEST(t.double_buffer == -1);
}

BOOST_AUTO_TEST_CASE(sharded_state_with_full_weight_slices_updates_and_gathers) {
  auto c = test::mnist_phased();
  c.sharding.weights = false;
  const Plan p = build_plan(c);
  BOOST_TEST(!test::variable(p, "fc4.weight").sharded);
  BOOST_TEST(test::variable(p, "fc4.weight.adam_m").sharded);
  const Lines ops = test::op_lines(p.phases[3].ops);
  const Lines want{"alloc fc4.weight.grad.shard",
                   "reduce_scatter fc4.weight.grad -> fc4.weight.grad.shard (mean)",
                   "free fc4.weight.grad",
                   "alloc fc4.weight.shard",
                   "slice_shard fc4.weight -> fc4.weight.shard",
                   "alloc fc4.weight.adam_m",
                   "remote_load fc4.weight.adam_m[0] -> fc4.weight.adam_m",
                   "alloc fc4.weight.adam_v",
                   "remote_load fc4.weight.adam_v[0] -> fc4.weight.adam_v",
                   "optimizer_step adam fc4.weight",
                   "free fc4.weight.grad.shard",
                   "remote_store fc4.weight.adam_m -> fc4.weight.adam_m[0]",
                   "free fc4.weight.adam_m",
                   "remote_store fc4.weight.adam_v -> fc4.weight.adam_v[0]",
                   "free fc4.weight.adam_v",
                   "all_gather fc4.weight.shard -> fc4.weight",
                   "free fc4.weight.shard",
                   "remote_store fc4.weight -> fc4.weight[0]",
                   "free fc4.weight"};
  expect_run(ops, want);
}

BOOST_AUTO_TEST_CASE(sharded_weight_with_full_state_all_reduces_and_slices_home) {
  auto c = test::mnist_phased();
  c.sharding.optimizer_state = false;
  const Plan p = build_plan(c);
  const Lines ops = test::op_lines(p.phases[3].ops);
  const Lines want{"all_reduce fc4.weight.grad (mean)",
                   "alloc fc4.weight.adam_m",
                   "remote_load fc4.weight.adam_m[0] -> fc4.weight.adam_m",
                   "alloc fc4.weight.adam_v",
                   "remote_load fc4.weight.adam_v[0] -> fc4.weight.adam_v",
                   "optimizer_step adam fc4.weight",
                   "free fc4.weight.grad",
                   "remote_store fc4.weight.adam_m -> fc4.weight.adam_m[0]",
                   "free fc4.weight.adam_m",
                   "remote_store fc4.weight.adam_v -> fc4.weight.adam_v[0]",
                   "free fc4.weight.adam_v",
                   "slice_shard fc4.weight -> fc4.weight.shard",
                   "free fc4.weight",
                   "remote_store fc4.weight.shard -> fc4.weight[0]",
                   "free fc4.weight.shard"};
  expect_run(ops, want);
  // The optimizer step reads the full (gathered) weight.
  for (const Op& op : p.phases[3].ops)
    if (op.kind == OpKind::kOptimizerStep && op.label == "adam fc4.weight")
      BOOST_TEST(p.tensors[static_cast<std::size_t>(
                               optimizer_operand(op, p.optimizer, OperandRole::kParam))]
                     .name == "fc4.weight");
}

BOOST_AUTO_TEST_CASE(reductions_run_inside_variable_groups) {
  auto c = test::mnist_phased();
  c.replication.factor = 4;
  c.replication.groupings = {{"pairs", 2, 1}, {"everyone", 4, 1}};
  c.variables.grouping = "pairs";
  c.sharding.grouping = "pairs";
  const Plan p = build_plan(c);
  BOOST_TEST((p.variables_grouping == ReplicaGrouping{4, 2, 1}));
  for (const Op& op : p.phases[3].ops) {
    if (op.kind == OpKind::kReduceScatter) {
      BOOST_TEST((op.grouping == ReplicaGrouping{4, 2, 1}));
      BOOST_TEST((op.shard_grouping == ReplicaGrouping{4, 2, 1}));
    }
    if (op.kind == OpKind::kAllReduce) BOOST_TEST((op.grouping == ReplicaGrouping{4, 2, 1}));
  }
}

BOOST_AUTO_TEST_CASE(sgd_momentum_is_state_like_adams_moments) {
  // The momentum buffer is a variable per parameter: sharded under RTS, remote with
  // remote.optimizer_state, loaded, updated and stored home around the step.
  auto c = test::mnist_phased();
  c.sharding.weights = false;
  c.training.optimizer = {};
  popkit::config::set_optimizer_type(c.training.optimizer, "sgd");
  c.training.optimizer.attributes.set("momentum", 0.9);
  const Plan p = build_plan(c);
  const Variable& m = test::variable(p, "fc4.weight.momentum");
  BOOST_TEST((m.role == VariableRole::kOptimizerState));
  BOOST_TEST(m.sharded);
  BOOST_TEST(m.remote);
  BOOST_TEST((m.dtype == DType::kFloat32));
  for (const Variable& v : p.variables)
    BOOST_TEST(v.name.find("adam") == std::string::npos, v.name);
  const Lines ops = test::op_lines(p.phases[3].ops);
  const Lines want{"slice_shard fc4.weight -> fc4.weight.shard",
                   "alloc fc4.weight.momentum",
                   "remote_load fc4.weight.momentum[0] -> fc4.weight.momentum",
                   "optimizer_step sgd fc4.weight",
                   "free fc4.weight.grad.shard",
                   "remote_store fc4.weight.momentum -> fc4.weight.momentum[0]",
                   "free fc4.weight.momentum",
                   "all_gather fc4.weight.shard -> fc4.weight"};
  expect_run(ops, want);
  // The step's operands: the gradient in, the weight shard and the buffer updated.
  for (const Op& op : p.phases[3].ops)
    if (op.kind == OpKind::kOptimizerStep && op.label == "sgd fc4.weight") {
      BOOST_TEST(op.inputs.size() == 1u);
      BOOST_REQUIRE(op.state.size() == 2u);
      BOOST_TEST(p.tensors[static_cast<std::size_t>(
                               optimizer_operand(op, p.optimizer, OperandRole::kState, 0))]
                     .name == "fc4.weight.momentum");
    }
}

BOOST_AUTO_TEST_CASE(sgd_without_momentum_keeps_no_state) {
  // torch.optim.SGD keeps no buffer without momentum: no optimizer state to plan, store
  // or checkpoint; the gradient is reduced where the weight lives.
  auto c = test::mnist_phased();
  c.training.optimizer = {};
  popkit::config::set_optimizer_type(c.training.optimizer, "sgd");
  const Plan p = build_plan(c);
  BOOST_TEST(p.variables.size() == 8u);  // 4 layers x (weight, bias)
  for (const Variable& v : p.variables) BOOST_TEST((v.role != VariableRole::kOptimizerState));
  for (const Phase& ph : p.phases)
    BOOST_TEST(ph.memory.peak_by_class[static_cast<std::size_t>(TensorClass::kOptimizerState)] ==
               0u);
  const Plan adam = build_plan(test::mnist_phased());
  BOOST_TEST(p.streaming_bytes < adam.streaming_bytes);
}

BOOST_AUTO_TEST_CASE(dropout_layers_have_no_variables_and_keep_the_width) {
  // Input dropout, then fc1, dropout, fc2: the first dropout has no backward (nothing
  // before it trains), the second one maps dy to dx with the same mask.
  auto c = test::tiny_standard();
  using popkit::config::make_layer;
  const auto fc = c.model.layers.back();
  c.model.layers = {make_layer("drop0", "dropout", {{"rate", 0.2}}),
                    make_layer("fc1", "linear", {{"out_features", 5}, {"activation", "relu"}}),
                    make_layer("drop1", "dropout", {{"rate", 0.5}}), fc};
  const Plan p = build_plan(c);
  BOOST_TEST(p.layers[0].out_features == p.layers[0].in_features);
  BOOST_TEST(p.layers[2].in_features == 5);
  BOOST_TEST(p.layers[2].out_features == 5);
  BOOST_TEST(p.layers[2].attributes.number("rate") == 0.5);
  BOOST_TEST(p.n_classes == fc.attributes.integer("out_features"));
  for (const Variable& v : p.variables) BOOST_TEST(v.name.rfind("drop", 0) != 0, v.name);
  const Lines body = test::op_lines(test::repeat_of(p.phases[0]).body);
  const Lines forwards{"forward drop0", "forward fc1", "forward drop1", "forward fc"};
  Lines got_forwards, got_backwards;
  for (const auto& line : body) {
    if (line.rfind("forward ", 0) == 0) got_forwards.push_back(line);
    if (line.rfind("backward ", 0) == 0) got_backwards.push_back(line);
  }
  BOOST_TEST(got_forwards == forwards, boost::test_tools::per_element());
  const Lines backwards{"backward fc", "backward drop1", "backward fc1"};
  BOOST_TEST(got_backwards == backwards, boost::test_tools::per_element());
  for (const Op& op : test::repeat_of(p.phases[0]).body)
    if (op.layer == 2) {
      BOOST_TEST(op.inputs.size() == 1u);
      BOOST_TEST(op.outputs.size() == 1u);
      BOOST_TEST(op.state.empty());
    }
}

BOOST_AUTO_TEST_SUITE_END()
