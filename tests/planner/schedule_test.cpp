// The phased schedule: the 7 phases of the MNIST example (fc2, fc3 identical, R=2,
// accumulation 4), sharing of identical layers, generalisation, explicit phases.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <string>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/build.h"
#include "planner/layer_ops.h"
#include "planner/operands.h"
#include "tests/planner/configs.h"
#include "tests/planner/helpers.h"

using namespace popkit::planner;
using Lines = std::vector<std::string>;

BOOST_AUTO_TEST_SUITE(schedule)

BOOST_AUTO_TEST_CASE(auto_phases_of_the_mnist_example) {
  const Plan p = build_plan(test::mnist_phased());
  std::vector<std::string> names;
  for (const auto& ph : p.phases) names.push_back(ph.name);
  const Lines want{"fc1 forward",
                   "fc2 forward",
                   "fc3 forward",
                   "fc4 forward+loss+backward+optimizer",
                   "fc3 backward+optimizer",
                   "fc2 backward+optimizer",
                   "fc1 backward+optimizer"};
  BOOST_TEST(names == want, boost::test_tools::per_element());
  BOOST_TEST(p.setup.empty());  // everything lives in streaming memory
  for (const auto& ph : p.phases) {
    BOOST_TEST(test::repeat_of(ph).steps == 4);
    BOOST_TEST((test::repeat_of(ph).io_mode == IoMode::kIo));
  }
}

BOOST_AUTO_TEST_CASE(fc2_forward_loads_inner_entry_0_and_moves_x_row_0_to_row_1) {
  const Plan p = build_plan(test::mnist_phased());
  const Lines want{
      "alloc inner.weight.shard",
      "remote_load inner.weight[0] -> inner.weight.shard",
      "alloc inner.weight",
      "all_gather inner.weight.shard -> inner.weight",
      "alloc inner.bias.shard",
      "remote_load inner.bias[0] -> inner.bias.shard",
      "alloc inner.bias",
      "all_gather inner.bias.shard -> inner.bias",
      "free inner.weight.shard",
      "free inner.bias.shard",
      "alloc inner.in",
      "alloc inner.pre",
      "alloc inner.out",
      "repeat 4 steps",
      "  remote_load x row 0 -> inner.in",
      "  forward fc2",
      "  remote_store inner.out -> x row 1",
      "  remote_store inner.pre -> pre row 1",
      "free inner.in",
      "free inner.pre",
      "free inner.out",
      "free inner.weight",
      "free inner.bias",
  };
  BOOST_TEST(test::op_lines(p.phases[1].ops) == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(fc1_forward_streams_images_and_stores_x_and_pre_row_0) {
  const Plan p = build_plan(test::mnist_phased());
  const Lines want{"host_load images -> images", "forward fc1", "remote_store fc1.out -> x row 0",
                   "remote_store fc1.pre -> pre row 0"};
  BOOST_TEST(test::op_lines(test::repeat_of(p.phases[0]).body) == want,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(fc4_phase_runs_loss_and_backward_inside_the_loop) {
  const Plan p = build_plan(test::mnist_phased());
  const Lines body{"remote_load x row 2 -> fc4.in",  "forward fc4",
                   "host_load labels -> labels",     "loss softmax_cross_entropy",
                   "host_store loss -> host",        "backward fc4",
                   "remote_store fc4.dx -> dx row 2"};
  BOOST_TEST(test::op_lines(test::repeat_of(p.phases[3]).body) == body,
             boost::test_tools::per_element());
  // After the loop: weight reduce-scattered (sharded, 5120 >= 512), bias all-reduced
  // (10 < 512), Adam on each, variables and state stored.
  const Lines after{
      "alloc fc4.weight.grad.shard",
      "reduce_scatter fc4.weight.grad -> fc4.weight.grad.shard (mean)",
      "free fc4.weight.grad",
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
      "remote_store fc4.weight.shard -> fc4.weight[0]",
      "free fc4.weight.shard",
      "all_reduce fc4.bias.grad (mean)",
      "alloc fc4.bias.adam_m",
      "remote_load fc4.bias.adam_m[0] -> fc4.bias.adam_m",
      "alloc fc4.bias.adam_v",
      "remote_load fc4.bias.adam_v[0] -> fc4.bias.adam_v",
      "optimizer_step adam fc4.bias",
      "free fc4.bias.grad",
      "remote_store fc4.bias.adam_m -> fc4.bias.adam_m[0]",
      "free fc4.bias.adam_m",
      "remote_store fc4.bias.adam_v -> fc4.bias.adam_v[0]",
      "free fc4.bias.adam_v",
      "remote_store fc4.bias -> fc4.bias[0]",
      "free fc4.bias",
  };
  const Lines all = test::op_lines(p.phases[3].ops);
  const Lines tail(all.end() - static_cast<std::ptrdiff_t>(after.size()), all.end());
  BOOST_TEST(tail == after, boost::test_tools::per_element());
  // Accumulators allocated before the loop and not zeroed: repeat step 0 writes them whole.
  BOOST_TEST(std::count(all.begin(), all.end(), "alloc fc4.weight.grad") == 1);
  BOOST_TEST(std::count(all.begin(), all.end(), "alloc fc4.bias.grad") == 1);
  BOOST_TEST(std::none_of(all.begin(), all.end(),
                          [](const std::string& l) { return l.starts_with("zero "); }));
}

BOOST_AUTO_TEST_CASE(backward_phases_move_dx_down_one_row) {
  const Plan p = build_plan(test::mnist_phased());
  const Lines fc3{"remote_load dx row 2 -> inner.dy", "remote_load x row 1 -> inner.in",
                  "remote_load pre row 2 -> inner.pre.saved", "backward fc3",
                  "remote_store inner.dx -> dx row 1"};
  const Lines fc2{"remote_load dx row 1 -> inner.dy", "remote_load x row 0 -> inner.in",
                  "remote_load pre row 1 -> inner.pre.saved", "backward fc2",
                  "remote_store inner.dx -> dx row 0"};
  // The first layer's backward streams the images again instead of buffering them.
  const Lines fc1{"remote_load dx row 0 -> fc1.dy", "host_load images -> images",
                  "remote_load pre row 0 -> fc1.pre.saved", "backward fc1"};
  BOOST_TEST(test::op_lines(test::repeat_of(p.phases[4]).body) == fc3,
             boost::test_tools::per_element());
  BOOST_TEST(test::op_lines(test::repeat_of(p.phases[5]).body) == fc2,
             boost::test_tools::per_element());
  BOOST_TEST(test::op_lines(test::repeat_of(p.phases[6]).body) == fc1,
             boost::test_tools::per_element());
  // fc3's variables are entry 1 of the shared buffers, fc2's entry 0.
  const Lines ops5 = test::op_lines(p.phases[4].ops);
  BOOST_TEST(ops5[1] == "remote_load inner.weight[1] -> inner.weight.shard");
  BOOST_TEST(std::count(ops5.begin(), ops5.end(),
                        "remote_store inner.weight.shard -> inner.weight[1]") == 1);
  BOOST_TEST(
      std::count(ops5.begin(), ops5.end(), "remote_store inner.bias.shard -> inner.bias[1]") == 1);
  const Lines ops6 = test::op_lines(p.phases[5].ops);
  BOOST_TEST(ops6[1] == "remote_load inner.weight[0] -> inner.weight.shard");
  // fc1's backward computes no dx, so it never gathers the full weight.
  const Lines ops7 = test::op_lines(p.phases[6].ops);
  BOOST_TEST(std::count(ops7.begin(), ops7.end(), "alloc fc1.weight") == 0);
}

BOOST_AUTO_TEST_CASE(batch_serial_buffers_are_three_rows_of_four_steps) {
  const Plan p = build_plan(test::mnist_phased());
  for (const char* name : {"x", "dx", "pre"}) {
    const RemoteBuffer& b = test::buffer(p, name);
    BOOST_TEST(b.rows == 3);
    BOOST_TEST(b.steps == 4);
    BOOST_TEST(b.entries() == 12);
    BOOST_TEST(b.element_shape == (std::vector<std::int64_t>{8, 512}),
               boost::test_tools::per_element());
    BOOST_TEST(b.entry_bytes == 8u * 512u * 4u);
  }
}

BOOST_AUTO_TEST_CASE(identical_layers_share_graph_buffers_and_tensors) {
  const Plan p = build_plan(test::mnist_phased());
  BOOST_TEST(p.layers[1].graph == p.layers[2].graph);
  BOOST_TEST(p.layers[1].row == 0);
  BOOST_TEST(p.layers[2].row == 1);
  BOOST_TEST(p.layers[0].graph != p.layers[1].graph);
  const RemoteBuffer& w = test::buffer(p, "inner.weight");
  BOOST_TEST(w.rows == 2);
  BOOST_TEST(test::variable(p, "fc2.weight").entry == 0);
  BOOST_TEST(test::variable(p, "fc3.weight").entry == 1);
  BOOST_TEST(test::variable(p, "fc2.weight").buffer == test::variable(p, "fc3.weight").buffer);
  BOOST_TEST(test::variable(p, "fc3.weight.adam_v").entry == 1);
  // Phases 2 and 3 run the same graph on the same device tensors.
  const Op& fc2 = test::repeat_of(p.phases[1]).body[1];
  const Op& fc3 = test::repeat_of(p.phases[2]).body[1];
  const LayerKind& linear = layer_kind("linear");
  BOOST_TEST(layer_operand(fc2, linear, OperandRole::kOut) ==
             layer_operand(fc3, linear, OperandRole::kOut));
  BOOST_TEST(layer_operand(fc2, linear, OperandRole::kParam, 0) ==  // the weight
             layer_operand(fc3, linear, OperandRole::kParam, 0));
  // 4 layers, 3 graphs: 3 * 6 variable buffers + x, dx, pre.
  BOOST_TEST(p.buffers.size() == 21u);
}

BOOST_AUTO_TEST_CASE(generalises_to_more_layers_and_any_accumulation) {
  auto c = test::mnist_phased();
  c.training.gradient_accumulation = 3;
  c.model.layers = {
      popkit::config::make_layer("a", "linear", {{"out_features", 64}, {"activation", "relu"}}),
      popkit::config::make_layer("b", "linear", {{"out_features", 64}, {"activation", "relu"}}),
      popkit::config::make_layer("c", "linear", {{"out_features", 32}}),
      popkit::config::make_layer("d", "linear", {{"out_features", 64}, {"activation", "relu"}}),
      popkit::config::make_layer("e", "linear", {{"out_features", 64}, {"activation", "relu"}}),
      popkit::config::make_layer("f", "linear", {{"out_features", 10}})};
  const Plan p = build_plan(c);
  BOOST_TEST(p.phases.size() == 11u);  // 5 forward, 1 combined, 5 backward
  BOOST_TEST(p.phases[5].name == "f forward+loss+backward+optimizer");
  BOOST_TEST(p.phases[10].name == "a backward+optimizer");
  // x holds 5 outputs of two widths: x.32 (c) and x.64 (a, b, d, e), steps 3.
  BOOST_TEST(test::buffer(p, "x.64").rows == 4);
  BOOST_TEST(test::buffer(p, "x.32").rows == 1);
  BOOST_TEST(test::buffer(p, "x.64").steps == 3);
  BOOST_TEST(test::buffer(p, "pre").rows == 4);  // c has no activation
  // d's input is c's output: x.32 row 0; d's output x.64 row 2.
  const Lines d{"remote_load x.32 row 0 -> d.in", "forward d", "remote_store d.out -> x.64 row 2",
                "remote_store d.pre -> pre row 2"};
  BOOST_TEST(test::op_lines(test::repeat_of(p.phases[3]).body) == d,
             boost::test_tools::per_element());
  for (const auto& ph : p.phases) BOOST_TEST(test::repeat_of(ph).steps == 3);
}

BOOST_AUTO_TEST_CASE(a_single_layer_is_one_phase) {
  auto c = test::mnist_phased();
  c.model.layers = {popkit::config::make_layer("fc", "linear", {{"out_features", 10}})};
  const Plan p = build_plan(c);
  BOOST_TEST(p.phases.size() == 1u);
  BOOST_TEST(p.phases[0].name == "fc forward+loss+backward+optimizer");
  for (const auto& b : p.buffers) BOOST_TEST(b.steps == 1);  // no activation buffers
}

BOOST_AUTO_TEST_CASE(explicit_phases_are_honoured) {
  auto c = test::mnist_phased();
  using popkit::config::Pass;
  c.execution.phases_auto = false;
  c.execution.phases = {{{"fc1", Pass::kForward}, {"fc2", Pass::kForward}},
                        {{"fc3", Pass::kForward},
                         {"fc4", Pass::kForward},
                         {"fc4", Pass::kBackward},
                         {"fc3", Pass::kBackward}},
                        {{"fc2", Pass::kBackward}, {"fc1", Pass::kBackward}}};
  const Plan p = build_plan(c);
  BOOST_TEST(p.phases.size() == 3u);
  BOOST_TEST(p.phases[0].name == "fc1 forward, fc2 forward");
  BOOST_TEST(p.phases[1].name ==
             "fc3 forward, fc4 forward+loss+backward+optimizer, fc3 backward+optimizer");
  // Only x_1 (fc2's output, fc3's input) crosses phases, and fc1's output (fc2's input,
  // used by fc2's backward in phase 3); dx_1 crosses from phase 2 to 3.
  BOOST_TEST(test::buffer(p, "x").rows == 2);
  BOOST_TEST(test::buffer(p, "dx").rows == 1);
  // fc2 and fc3 share a graph but sit in different phases; phase 1 has fc1 and fc2.
  const Lines first{
      "host_load images -> images",         "forward fc1", "remote_store fc1.out -> x row 0",
      "remote_store fc1.pre -> pre row 0",  "forward fc2", "remote_store inner.out -> x row 1",
      "remote_store inner.pre -> pre row 1"};
  BOOST_TEST(test::op_lines(test::repeat_of(p.phases[0]).body) == first,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(explicit_phases_out_of_order_are_refused) {
  auto c = test::mnist_phased();
  using popkit::config::Pass;
  c.execution.phases_auto = false;
  c.execution.phases = {{{"fc1", Pass::kForward}, {"fc2", Pass::kForward}, {"fc3", Pass::kForward}},
                        {{"fc4", Pass::kForward}},
                        {{"fc4", Pass::kBackward},
                         {"fc3", Pass::kBackward},
                         {"fc2", Pass::kBackward},
                         {"fc1", Pass::kBackward}}};
  BOOST_CHECK_EXCEPTION(build_plan(c), popkit::Error, [](const popkit::Error& e) {
    return std::string(e.what()).find("the last layer's backward right after its forward") !=
           std::string::npos;
  });
}

// execution.io_schedule: preload (PopART's Preload). The remote weights a phase loaded
// before its compute loop are loaded in the phase before, into a tensor of their own;
// the phase that uses them reads that tensor up to its free, and each phase's peak grows
// by exactly the bytes it loads ahead.
BOOST_AUTO_TEST_CASE(preload_moves_the_next_phases_weight_loads_into_the_phase_before) {
  const Plan on_demand = build_plan(test::mnist_phased());
  auto c = test::mnist_phased();
  c.execution.io_schedule = popkit::config::IoSchedule::kPreload;
  const Plan p = build_plan(c);
  BOOST_REQUIRE(p.phases.size() == on_demand.phases.size());
  auto loads_before_loop = [](const std::vector<Op>& ops) {
    std::vector<std::string> out;
    for (const Op& o : ops) {
      if (o.kind == OpKind::kRepeat) break;
      if (o.kind == OpKind::kRemoteLoad && !o.preload) out.push_back(o.label);
    }
    return out;
  };
  auto preloaded = [&](const Plan& plan, std::size_t ph) {
    std::vector<std::string> out;
    std::uint64_t bytes = 0;
    for (const Op& o : plan.phases[ph].ops) {
      if (!o.preload) continue;
      if (o.kind == OpKind::kAlloc)
        bytes += plan.tensors[static_cast<std::size_t>(o.outputs[0])].nbytes;
      if (o.kind == OpKind::kRemoteLoad) out.push_back(o.label);
    }
    return std::make_pair(out, bytes);
  };
  const Lines first_loads = loads_before_loop(on_demand.phases[0].ops);
  BOOST_TEST(loads_before_loop(p.phases[0].ops) == first_loads, boost::test_tools::per_element());
  BOOST_TEST(preloaded(p, p.phases.size() - 1).first.empty());
  std::size_t moved = 0;
  for (std::size_t ph = 1; ph < p.phases.size(); ++ph) {
    BOOST_TEST_CONTEXT("phase " << p.phases[ph].name) {
      // Nothing left to load before the loop; what on_demand loaded there, the phase
      // before loads, into "<home>.preload<parity>".
      BOOST_TEST(loads_before_loop(p.phases[ph].ops).empty());
      const auto [labels, bytes] = preloaded(p, ph - 1);
      const Lines want = loads_before_loop(on_demand.phases[ph].ops);
      BOOST_TEST(labels.size() == want.size());
      for (std::size_t i = 0; i < std::min(labels.size(), want.size()); ++i)
        BOOST_TEST(labels[i] == want[i] + ".preload" + std::to_string(ph % 2));
      moved += labels.size();
      BOOST_TEST(p.phases[ph - 1].memory.peak <= on_demand.phases[ph - 1].memory.peak + bytes);
      BOOST_TEST(p.phases[ph - 1].memory.peak >= on_demand.phases[ph - 1].memory.peak);
    }
  }
  // Weight and bias of fc2 forward, fc3 forward and fc4; the weight of fc3 backward and
  // of fc2 backward (fc1 backward loads its weight after the loop, for the optimizer).
  BOOST_TEST(moved == 8u);
}

BOOST_AUTO_TEST_SUITE_END()
