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

// One variable wte: the head's forward and backward read it, both backwards accumulate
// into one gradient (the head's first, writing the running mean; the embedding's adds),
// and one optimizer step updates it.
BOOST_AUTO_TEST_CASE(a_tied_head_shares_the_embeddings_variable_and_gradient) {
  const Plan p = build_plan(test::gpt());
  const auto named = [&](const std::string& name) {
    return std::count_if(p.variables.begin(), p.variables.end(),
                         [&](const Variable& v) { return v.name == name; });
  };
  BOOST_TEST(named("wte.wte") == 1);
  BOOST_TEST(named("head.weight") == 0);
  int head_bwd_grad = -1, emb_bwd_grad = -1, steps_on_wte = 0;
  std::uint32_t head_adds = 9, emb_adds = 9;
  each_op(p.phases.at(0).ops, [&](const Op& o) {
    if (o.kind == OpKind::kBackward && o.label == "head") {
      head_bwd_grad = o.state.at(0);
      head_adds = o.grads_add;
    }
    if (o.kind == OpKind::kBackward && o.label == "wte") {
      emb_bwd_grad = o.state.at(0);
      emb_adds = o.grads_add;
    }
    if (o.kind == OpKind::kOptimizerStep &&
        p.variables.at(static_cast<std::size_t>(o.variable)).name == "wte.wte")
      ++steps_on_wte;
    if (o.kind == OpKind::kForward && o.label == "head")
      BOOST_TEST(p.tensors.at(static_cast<std::size_t>(o.inputs.at(1))).name == "wte.wte");
  });
  BOOST_TEST(head_bwd_grad >= 0);
  BOOST_TEST(head_bwd_grad == emb_bwd_grad);
  BOOST_TEST(head_adds == 0u);
  BOOST_TEST(emb_adds == 1u);  // parameter 0, wte
  BOOST_TEST(steps_on_wte == 1);
}

// Labels are a sample's T next tokens; the logits T x vocabulary; a layer norm after the
// blocks normalises each position over its C features.
BOOST_AUTO_TEST_CASE(a_sample_is_a_sequence_through_the_loss) {
  const Plan p = build_plan(test::gpt());
  BOOST_TEST(p.positions == 16);
  BOOST_TEST(p.n_classes == 256);
  BOOST_TEST((tensor(p, "labels").shape == Shape{2, 16}));
  BOOST_TEST((tensor(p, "dlogits").shape == Shape{2, 16 * 256}));
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
