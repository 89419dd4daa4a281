// A head tied to the token table on another pipeline stage (planner/build_stage.cpp,
// TiedCopy): one variable and its optimizer state on the embedding's stage, a copy of
// the weight on the head's, sent at the step's start; the head's gradient sent back after
// the flush and added to the embedding's before the one update.
#include <fmt/format.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "config/validate.h"
#include "planner/build.h"
#include "planner/memory.h"
#include "tests/planner/configs.h"

using namespace popkit::planner;
using popkit::config::Config;

namespace {

// The test GPT (V 256, C 32), R 2, tied or not, in `placement`'s stages.
Config tied_gpt(const std::vector<std::vector<std::string>>& placement, bool tied = true) {
  Config c = test::gpt({.tied = tied});
  c.replication.factor = 2;
  c.replication.groupings = {{"everyone", 2, 1}};
  c.training.gradient_accumulation = 2 * static_cast<std::int64_t>(placement.size());
  c.pipeline.stages = static_cast<std::int64_t>(placement.size());
  c.pipeline.placement_auto = false;
  c.pipeline.placement = placement;
  return c;
}

const std::vector<std::vector<std::string>> kTwo = {{"wte", "h0"}, {"h1", "ln_f", "head"}};
const std::vector<std::vector<std::string>> kThree = {{"wte", "h0"}, {"h1"}, {"ln_f", "head"}};

int tensor_named(const Plan& p, const std::string& name, int stage) {
  for (std::size_t t = 0; t < p.tensors.size(); ++t)
    if (p.tensors[t].name == name && p.tensors[t].stage == stage) return static_cast<int>(t);
  return -1;
}

const Phase& stage_program(const Plan& p, int s) {
  for (const Phase& ph : p.phases)
    if (ph.stage == s) return ph;
  throw std::runtime_error("no stage program");
}

// The index of the first op of `kind` in the stage's program that names `t`, or -1.
std::int64_t op_with(const Phase& ph, OpKind kind, int t) {
  for (std::size_t i = 0; i < ph.ops.size(); ++i) {
    const Op& o = ph.ops[i];
    if (o.kind != kind) continue;
    for (const auto* list : {&o.inputs, &o.outputs, &o.state})
      for (const int x : *list)
        if (x == t) return static_cast<std::int64_t>(i);
  }
  return -1;
}

std::uint64_t table_bytes() {
  return 256u * 32u * 4u;  // [V, C] float32
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pipeline_tie)

// The config validates; the plan holds one variable (the embedding's, with its state) on
// stage 0, the copy on the head's stage, always live, written by stage 0's send before the
// first slot and received in place before the head's; the head's forward and backward
// read the copy.
BOOST_AUTO_TEST_CASE(the_head_s_stage_reads_a_copy_sent_at_the_step_s_start) {
  for (const auto& placement : {kTwo, kThree}) {
    Config c = tied_gpt(placement);
    BOOST_TEST_REQUIRE(!popkit::config::has_errors(popkit::config::validate_config(c)));
    const Plan p = build_plan(c);
    const int last = static_cast<int>(placement.size()) - 1;
    int tables = 0;
    for (const Variable& v : p.variables) {
      BOOST_TEST(v.name.rfind("head.", 0) != 0, v.name);  // the head has no variable
      if (v.name.rfind("wte.wte", 0) == 0) {
        ++tables;
        BOOST_TEST(p.tensors[static_cast<std::size_t>(v.device_tensor)].stage == 0);
      }
    }
    BOOST_TEST(tables == 3);  // the table and Adam's two moments
    const int copy = tensor_named(p, "wte.wte.copy", last);
    BOOST_REQUIRE(copy >= 0);
    const DeviceTensor& d = p.tensors[static_cast<std::size_t>(copy)];
    BOOST_TEST(d.always_live);
    BOOST_TEST((d.cls == TensorClass::kWeights));
    BOOST_TEST(d.nbytes == table_bytes());

    const Phase& first = stage_program(p, 0);
    const std::int64_t send = op_with(first, OpKind::kSend, copy);
    BOOST_REQUIRE(send >= 0);
    BOOST_TEST(first.ops[static_cast<std::size_t>(send)].peer == last);
    BOOST_TEST(first.ops[static_cast<std::size_t>(send)].label ==
               fmt::format("wte.wte -> wte.wte.copy (to stage {})", last));
    BOOST_TEST(first.ops[static_cast<std::size_t>(send)].pipeline_bytes == table_bytes());
    BOOST_TEST(send < first.slots.front().first_op);

    const Phase& head = stage_program(p, last);
    const std::int64_t recv = op_with(head, OpKind::kRecv, copy);
    BOOST_REQUIRE(recv >= 0);
    const Op& r = head.ops[static_cast<std::size_t>(recv)];
    BOOST_TEST(r.inputs[0] == copy);
    BOOST_TEST(r.outputs[0] == copy);
    BOOST_TEST(r.peer == 0);
    BOOST_TEST(recv < head.slots.front().first_op);
    int reads = 0;
    for (const Op& o : head.ops)
      if ((o.kind == OpKind::kForward || o.kind == OpKind::kBackward) &&
          std::find(o.inputs.begin(), o.inputs.end(), copy) != o.inputs.end())
        ++reads;
    BOOST_TEST(reads == 2 * c.training.gradient_accumulation);
  }
}

// After the flush the head's stage sends its gradient into stage 0's receive buffer and
// frees it; stage 0 receives it in place and adds it to the embedding's before the
// reduction and the one optimizer step.
BOOST_AUTO_TEST_CASE(the_head_s_gradient_is_added_to_the_embedding_s_before_its_update) {
  for (const auto& placement : {kTwo, kThree}) {
    const Plan p = build_plan(tied_gpt(placement));
    const int last = static_cast<int>(placement.size()) - 1;
    const int buffer = tensor_named(p, "recv.head.weight.grad", 0);
    const int head_grad = tensor_named(p, "head.weight.grad", last);
    const int wte_grad = tensor_named(p, "wte.wte.grad", 0);
    BOOST_REQUIRE(buffer >= 0);
    BOOST_REQUIRE(head_grad >= 0);
    BOOST_REQUIRE(wte_grad >= 0);
    BOOST_TEST(p.tensors[static_cast<std::size_t>(buffer)].always_live);

    const Phase& head = stage_program(p, last);
    const std::int64_t send = op_with(head, OpKind::kSend, buffer);
    BOOST_REQUIRE(send >= 0);
    BOOST_TEST(send >= head.slots.back().end_op);
    BOOST_TEST(head.ops[static_cast<std::size_t>(send)].inputs[0] == head_grad);
    BOOST_TEST(op_with(head, OpKind::kFree, head_grad) > send);
    for (const Op& o : head.ops) BOOST_TEST((o.kind != OpKind::kOptimizerStep || o.layer != 0));

    const Phase& first = stage_program(p, 0);
    const std::int64_t recv = op_with(first, OpKind::kRecv, buffer);
    const std::int64_t add = op_with(first, OpKind::kAdd, buffer);
    const std::int64_t reduce = op_with(first, OpKind::kAllReduce, wte_grad);
    BOOST_REQUIRE(recv >= first.slots.back().end_op);
    BOOST_TEST(first.ops[static_cast<std::size_t>(recv)].peer == last);
    BOOST_REQUIRE(add > recv);
    BOOST_TEST(first.ops[static_cast<std::size_t>(add)].state[0] == wte_grad);
    BOOST_TEST(first.ops[static_cast<std::size_t>(add)].label ==
               "wte.wte.grad += recv.head.weight.grad");
    BOOST_TEST(reduce > add);
  }
}

// Memory: the head's stage holds the copy (one table) where an untied head holds its
// weight, gradient and Adam's moments; the embedding's stage adds the receive buffer. A
// stage's peak is still the sum of its tensors (all allocated for the whole step), and
// the walk accepts the transfers past the stage between.
BOOST_AUTO_TEST_CASE(memory_per_stage_counts_the_copy_and_the_receive_buffer) {
  const Plan tied = build_plan(tied_gpt(kThree));
  const Plan untied = build_plan(tied_gpt(kThree, false));
  check_plan(tied);
  for (const Phase& ph : tied.phases) {
    std::uint64_t sum = 0;
    for (const DeviceTensor& t : tied.tensors)
      if (t.stage == ph.stage) sum += t.nbytes;
    BOOST_TEST(ph.memory.peak <= sum, ph.name);
  }
  const auto peak = [](const Plan& p, int s) { return stage_program(p, s).memory.peak; };
  BOOST_TEST(peak(tied, 0) == peak(untied, 0) + table_bytes());
  BOOST_TEST(peak(tied, 1) == peak(untied, 1));
  // Untied: weight, gradient, two moments; tied: the copy and the gradient.
  BOOST_TEST(peak(tied, 2) + 2 * table_bytes() == peak(untied, 2));
}

// A checkpoint holds the plan's variables by name: the same names, shapes and dtypes as
// without pipelining, the table once.
BOOST_AUTO_TEST_CASE(the_variables_are_those_without_pipelining) {
  Config plain = tied_gpt(kThree);
  plain.pipeline = {};
  const Plan piped = build_plan(tied_gpt(kThree));
  const Plan standard = build_plan(plain);
  BOOST_REQUIRE(!standard.pipeline);
  BOOST_REQUIRE(piped.variables.size() == standard.variables.size());
  for (std::size_t i = 0; i < piped.variables.size(); ++i) {
    BOOST_TEST(piped.variables[i].name == standard.variables[i].name);
    BOOST_TEST(piped.variables[i].meta_shape == standard.variables[i].meta_shape,
               boost::test_tools::per_element());
    BOOST_TEST((piped.variables[i].dtype == standard.variables[i].dtype));
  }
}

// Evaluation sends the copy too, and has no gradient to send back.
BOOST_AUTO_TEST_CASE(evaluation_sends_the_copy) {
  const Plan eval = build_plan(tied_gpt(kTwo), Program::kEval);
  const int copy = tensor_named(eval, "wte.wte.copy", 1);
  BOOST_REQUIRE(copy >= 0);
  BOOST_TEST(op_with(stage_program(eval, 0), OpKind::kSend, copy) >= 0);
  BOOST_TEST(op_with(stage_program(eval, 1), OpKind::kRecv, copy) >= 0);
  BOOST_TEST(tensor_named(eval, "recv.head.weight.grad", 0) == -1);
}

BOOST_AUTO_TEST_SUITE_END()
