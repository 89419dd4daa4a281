// A decoder-only transformer planned: GPT-2's published parameter counts, the tied head's
// one variable and summed gradient, sequences through the loss, and the attention's
// memory as its kernels use it.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <string>

#include "config/validate.h"
#include "planner/attention_workspace.h"
#include "planner/build.h"
#include "planner/workspace.h"
#include "tests/planner/configs.h"

using namespace popkit::planner;
using Shape = std::vector<std::int64_t>;

namespace {

// The trained parameters' elements: every variable but the optimizer's state.
std::int64_t parameters(const Plan& p) {
  std::int64_t n = 0;
  for (const Variable& v : p.variables)
    if (v.role != VariableRole::kOptimizerState) n += v.nelms;
  return n;
}

const DeviceTensor& tensor(const Plan& p, const std::string& name) {
  const auto it = std::find_if(p.tensors.begin(), p.tensors.end(),
                               [&](const DeviceTensor& t) { return t.name == name; });
  BOOST_REQUIRE(it != p.tensors.end());
  return *it;
}

// Every op of the plan, repeats' bodies included.
template <typename Fn>
void each_op(const std::vector<Op>& ops, const Fn& fn) {
  for (const Op& o : ops) {
    fn(o);
    each_op(o.body, fn);
  }
}

test::GptShape gpt2(std::int64_t width, std::int64_t blocks, std::int64_t heads) {
  return {.vocabulary = 50257,
          .positions = 1024,
          .width = width,
          .blocks = blocks,
          .heads = heads,
          .sequence = 1024};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpt)

// Hugging Face's gpt2, gpt2-medium, gpt2-large and gpt2-xl, whose head is tied.
BOOST_AUTO_TEST_CASE(gpt2_sizes_have_the_published_parameter_counts) {
  BOOST_TEST(parameters(build_plan(test::gpt(gpt2(768, 12, 12)))) == 124'439'808);
  BOOST_TEST(parameters(build_plan(test::gpt(gpt2(1024, 24, 16)))) == 354'823'168);
  BOOST_TEST(parameters(build_plan(test::gpt(gpt2(1280, 36, 20)))) == 774'030'080);
  BOOST_TEST(parameters(build_plan(test::gpt(gpt2(1600, 48, 25)))) == 1'557'611'200);
  // Untied, the head has a weight of its own: vocabulary x width more.
  auto untied = gpt2(768, 12, 12);
  untied.tied = false;
  BOOST_TEST(parameters(build_plan(test::gpt(untied))) == 124'439'808 + 50257 * 768);
}

BOOST_AUTO_TEST_CASE(a_config_of_each_kind_validates) {
  auto c = test::gpt();
  for (const auto& d : popkit::config::validate_config(c)) BOOST_TEST_MESSAGE(d.message);
  BOOST_TEST(!popkit::config::has_errors(popkit::config::validate_config(c)));
}

// One variable wte: the head's forward and backward read it; each backward accumulates
// its own gradient (the head's named after it), one add puts the head's into the
// embedding's before the one optimizer step that updates wte.
BOOST_AUTO_TEST_CASE(a_tied_head_shares_the_embeddings_variable_and_gradient) {
  const Plan p = build_plan(test::gpt());
  const auto named = [&](const std::string& name) {
    return std::count_if(p.variables.begin(), p.variables.end(),
                         [&](const Variable& v) { return v.name == name; });
  };
  const auto tname = [&](int t) { return p.tensors.at(static_cast<std::size_t>(t)).name; };
  BOOST_TEST(named("wte.wte") == 1);
  BOOST_TEST(named("head.weight") == 0);
  std::vector<std::string> order;  // the head's and wte's gradient ops, in order
  each_op(p.phases.at(0).ops, [&](const Op& o) {
    if (o.kind == OpKind::kBackward && (o.label == "head" || o.label == "wte"))
      order.push_back(o.label + " backward into " + tname(o.state.at(0)));
    if (o.kind == OpKind::kAdd)
      order.push_back(tname(o.state.at(0)) + " += " + tname(o.inputs.at(0)));
    if (o.kind == OpKind::kOptimizerStep &&
        p.variables.at(static_cast<std::size_t>(o.variable)).name == "wte.wte")
      order.push_back("update " + tname(o.inputs.at(0)));
    if (o.kind == OpKind::kForward && o.label == "head")
      BOOST_TEST(tname(o.inputs.at(1)) == "wte.wte");
  });
  const std::vector<std::string> want{"head backward into head.weight.grad",
                                      "wte backward into wte.wte.grad",
                                      "wte.wte.grad += head.weight.grad", "update wte.wte.grad"};
  BOOST_TEST(order == want, boost::test_tools::per_element());
}

// Phased, the head's gradient waits in streaming memory from its backward phase to the
// embedding's, whose program loads it and adds it before the update.
BOOST_AUTO_TEST_CASE(a_tied_head_in_phased_execution_keeps_its_gradient_remote_between_phases) {
  auto c = test::gpt();
  c.execution.mode = popkit::config::ExecutionMode::kPhased;
  const Plan p = build_plan(c);
  const auto buffer = std::find_if(p.buffers.begin(), p.buffers.end(), [](const RemoteBuffer& rb) {
    return rb.name == "head.weight.grad";
  });
  BOOST_REQUIRE(buffer != p.buffers.end());
  const int index = static_cast<int>(buffer - p.buffers.begin());
  BOOST_TEST(buffer->entry_bytes == 256u * 32 * 4);  // vocabulary x width floats
  int stored_in = -1, loaded_in = -1, added_in = -1, updated_in = -1;
  for (std::size_t ph = 0; ph < p.phases.size(); ++ph)
    each_op(p.phases[ph].ops, [&](const Op& o) {
      const int at = static_cast<int>(ph);
      if (o.kind == OpKind::kRemoteStore && o.buffer == index) stored_in = at;
      if (o.kind == OpKind::kRemoteLoad && o.buffer == index) loaded_in = at;
      if (o.kind == OpKind::kAdd) added_in = at;
      if (o.kind == OpKind::kOptimizerStep &&
          p.variables.at(static_cast<std::size_t>(o.variable)).name == "wte.wte")
        updated_in = at;
    });
  BOOST_TEST(stored_in >= 0);
  BOOST_TEST(loaded_in > stored_in);
  BOOST_TEST(added_in == loaded_in);
  BOOST_TEST(updated_in == loaded_in);
  BOOST_TEST(updated_in == static_cast<int>(p.phases.size()) - 1);  // the embedding's backward
}

// Labels are a sample's T next tokens; the logits T x vocabulary; a layer norm after the
// blocks normalises each position over its C features.
BOOST_AUTO_TEST_CASE(a_sample_is_a_sequence_through_the_loss) {
  const Plan p = build_plan(test::gpt());
  BOOST_TEST(p.positions == 16);
  BOOST_TEST(p.n_classes == 256);
  BOOST_TEST((tensor(p, "labels").shape == Shape{2, 16}));
  BOOST_TEST((tensor(p, "head.out").shape == Shape{2, 16 * 256}));  // logits, then dlogits
  BOOST_TEST((tensor(p, "ln_f.scale").shape == Shape{32}));
  BOOST_TEST((tensor(p, "ln_f.mean").shape == Shape{2 * 16}));
  BOOST_TEST(p.layers.front().in_features == 16);
  BOOST_TEST(p.layers.front().out_features == 16 * 32);
  BOOST_TEST(p.layers.back().sequence == 16);
}

// The attention keeps its probabilities, B NH T T floats, for the backward; its kernels'
// scratch, one region per (batch, head) pair, is within the block's workspace.
BOOST_AUTO_TEST_CASE(attention_memory_is_what_its_kernels_use) {
  const Plan p = build_plan(test::gpt());
  const AttentionShape s{2, 16, 32, 4};
  const DeviceTensor& probs = tensor(p, "h0.attn.probs");
  BOOST_TEST((probs.shape == Shape{2, 4, 16, 16}));
  BOOST_TEST(probs.nbytes == attention_saved_bytes(s));
  std::uint64_t block_workspace = 0;
  each_op(p.phases.at(0).ops, [&](const Op& o) {
    if ((o.kind == OpKind::kForward || o.kind == OpKind::kBackward) && o.label == "h0")
      block_workspace = std::max(block_workspace, op_workspace_bytes(o, p));
  });
  BOOST_TEST(block_workspace >= 8 * attention_backward_call_workspace(s));
}

// Evaluation keeps nothing for a backward: the block's forward holds its intermediates
// in its scratch instead.
BOOST_AUTO_TEST_CASE(an_evaluation_forward_holds_its_intermediates_in_scratch) {
  const auto c = test::gpt();
  const auto forward_workspace = [](const Plan& p) {
    std::uint64_t most = 0;
    each_op(p.phases.at(0).ops, [&](const Op& o) {
      if (o.kind == OpKind::kForward && o.label == "h0")
        most = std::max(most, op_workspace_bytes(o, p));
    });
    return most;
  };
  const Plan train = build_plan(c);
  const Plan eval = build_plan(c, Program::kEval);
  // a, o, h, m [2, 16, 32]; qkv [2, 16, 96]; f [2, 16, 128]; P [2 x 4, 16, 16]; the
  // statistics [2, 16] twice: 4 x 4096 + 12288 + 16384 + 8192 + 2 x 128 bytes.
  BOOST_TEST(forward_workspace(eval) - forward_workspace(train) == 53504u);
}

BOOST_AUTO_TEST_SUITE_END()
