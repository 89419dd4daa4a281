// Evaluation as a plan (planner::Program::kEval): what the planner leaves out, the
// engine's result against a plain forward written here, the same result in every
// mode, io mode and sharding, replicas and micro-batches against one another, and
// planned against measured memory per phase.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "engine/engine.h"
#include "planner/build.h"
#include "planner/names.h"
#include "tests/support/test_profile.h"

using namespace popkit;
using engine::Engine;
using planner::Program;

namespace {

constexpr std::int64_t kSide = 5;  // 5 x 5 images: 25 inputs

config::Config model(std::int64_t replicas) {
  config::Config c;
  c.name = "eval-test";
  c.model.input_shape = {kSide, kSide};
  using config::Activation;
  using config::make_layer;
  c.model.layers = {make_layer("fc1", "linear", {{"out_features", 12}, {"activation", "gelu"}}),
                    make_layer("drop1", "dropout", {{"rate", 0.5}}),
                    make_layer("fc2", "linear", {{"out_features", 12}, {"activation", "relu"}}),
                    make_layer("fc3", "linear", {{"out_features", 10}})};
  c.model.init.weights_std = 0.3;
  c.replication.factor = replicas;
  c.replication.groupings = {{"everyone", replicas, 1}};
  c.variables.grouping = "everyone";
  c.sharding.grouping = "everyone";
  c.training.micro_batch_size = 4;
  c.training.gradient_accumulation = 2;
  c.training.optimizer.lr = 1e-2;
  c.eval.micro_batch_size = 7;  // 101 test samples: partial micro-batches everywhere
  c.data.dataset = config::Dataset::kSynthetic;
  return ::popkit::test_support::with_test_profile(c);
}

const engine::Dataset& test_set() {
  static const engine::Dataset d = engine::make_synthetic(101, kSide, kSide, 11, 0.8);
  return d;
}

engine::EngineOptions options(engine::IoOverlap how = engine::IoOverlap::kAuto) {
  engine::EngineOptions o;
  o.n_threads = 2;
  o.io_overlap = how;
  return o;
}

// A training engine of `c` after a few steps, so the weights are not the initial ones.
const Engine& trained() {
  static const Engine* e = [] {
    const config::Config c = model(2);
    auto* engine = new Engine(planner::build_plan(c), options());
    engine->initialize();
    const engine::Dataset train = engine::make_synthetic(64, kSide, kSide, 11, 0.8);
    const auto& p = engine->plan();
    engine::DatasetBatches batches(train, p.replication_factor, p.gradient_accumulation,
                                   p.micro_batch_size);
    std::vector<std::int64_t> order(static_cast<std::size_t>(train.n));
    std::iota(order.begin(), order.end(), 0);
    for (std::int64_t s = 0; s < 12; ++s) {
      batches.set_batch(order, s % (train.n / p.global_batch_size));
      engine->train_step(batches);
    }
    return engine;
  }();
  return *e;
}

engine::EvalResult evaluate(const config::Config& c,
                            engine::IoOverlap how = engine::IoOverlap::kAuto) {
  Engine e(planner::build_plan(c, Program::kEval), options(how));
  engine::copy_weights(trained(), e);
  return e.evaluate(test_set());
}

// The forward written out plainly in double: x W + b, the activation, dropout as the
// identity; mean cross-entropy and argmax over the test set.
engine::EvalResult reference(const config::Config& c) {
  engine::EvalResult r;
  double loss = 0.0;
  const std::int64_t pixels = kSide * kSide;
  for (std::int64_t i = 0; i < test_set().n; ++i) {
    std::vector<double> x(static_cast<std::size_t>(pixels));
    for (std::int64_t p = 0; p < pixels; ++p)
      x[static_cast<std::size_t>(p)] =
          (test_set().image(i)[p] / 255.0 - c.data.normalize_mean) / c.data.normalize_std;
    for (const config::Layer& l : c.model.layers) {
      if (l.type == "dropout") continue;
      const std::vector<float> w = trained().read_variable(l.name + ".weight");
      const std::vector<float> b = trained().read_variable(l.name + ".bias");
      const auto in = static_cast<std::int64_t>(x.size());
      const std::int64_t out = l.attributes.integer("out_features");
      const std::string& act = l.attributes.name("activation");
      std::vector<double> y(static_cast<std::size_t>(out));
      for (std::int64_t j = 0; j < out; ++j) {
        double z = b[static_cast<std::size_t>(j)];
        for (std::int64_t k = 0; k < in; ++k)
          z += x[static_cast<std::size_t>(k)] * w[static_cast<std::size_t>(k * out + j)];
        if (act == "relu") z = std::max(z, 0.0);
        if (act == "gelu")
          z = 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
        y[static_cast<std::size_t>(j)] = z;
      }
      x = std::move(y);
    }
    const double top = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (double v : x) sum += std::exp(v - top);
    const auto label = test_set().labels[static_cast<std::size_t>(i)];
    loss += -(x[label] - top - std::log(sum));
    if (std::max_element(x.begin(), x.end()) - x.begin() == label) ++r.correct;
  }
  r.n = test_set().n;
  r.loss = loss / static_cast<double>(r.n);
  return r;
}

bool same(const engine::EvalResult& a, const engine::EvalResult& b) {
  return a.n == b.n && a.correct == b.correct && a.loss == b.loss;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(evaluation)

BOOST_AUTO_TEST_CASE(an_evaluation_plan_holds_no_training_state) {
  for (const auto mode : {config::ExecutionMode::kStandard, config::ExecutionMode::kPhased}) {
    BOOST_TEST_CONTEXT(popkit::enum_name(mode)) {
      config::Config c = model(2);
      c.execution.mode = mode;
      c.remote = {mode == config::ExecutionMode::kPhased, true};
      c.sharding.enabled = true;
      c.sharding.threshold = 8;
      const planner::Plan train = planner::build_plan(c);
      const planner::Plan eval = planner::build_plan(c, Program::kEval);
      BOOST_TEST((eval.program == Program::kEval));
      BOOST_TEST(eval.micro_batch_size == 7);
      BOOST_TEST(eval.global_batch_size == 7 * 2 * 2);
      // The weights and biases where training keeps them, nothing else.
      std::vector<std::string> names;
      for (const planner::Variable& v : eval.variables) {
        BOOST_TEST((v.role != planner::VariableRole::kOptimizerState));
        names.push_back(v.name);
        const auto it = std::find_if(train.variables.begin(), train.variables.end(),
                                     [&](const planner::Variable& t) { return t.name == v.name; });
        BOOST_REQUIRE(it != train.variables.end());
        BOOST_TEST(v.remote == it->remote);
        BOOST_TEST(v.sharded == it->sharded);
      }
      BOOST_TEST(names == (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight",
                                                    "fc2.bias", "fc3.weight", "fc3.bias"}),
                 boost::test_tools::per_element());
      for (const planner::DeviceTensor& t : eval.tensors) {
        BOOST_TEST((t.cls != planner::TensorClass::kGradAccumulators));
        BOOST_TEST((t.cls != planner::TensorClass::kOptimizerState));
      }
      // Forward, shard gathers and host IO only; the logits go to the host.
      int logits = 0;
      std::function<void(const std::vector<planner::Op>&)> walk =
          [&](const std::vector<planner::Op>& ops) {
            for (const planner::Op& op : ops) {
              BOOST_TEST((op.kind != planner::OpKind::kBackward &&
                          op.kind != planner::OpKind::kLoss &&
                          op.kind != planner::OpKind::kOptimizerStep &&
                          op.kind != planner::OpKind::kReduceScatter &&
                          op.kind != planner::OpKind::kAllReduce));
              if (op.kind == planner::OpKind::kHostStore && op.stream == planner::Stream::kLogits)
                ++logits;
              walk(op.body);
            }
          };
      for (const planner::Phase& ph : eval.phases) walk(ph.ops);
      BOOST_TEST(logits == 1);
      // Phased: a phase per linear layer, the dropout layer with the one after it.
      BOOST_TEST(eval.phases.size() == (mode == config::ExecutionMode::kPhased ? 3u : 1u));
      // No optimizer state and no gradients on the device in any phase.
      for (const planner::Phase& ph : eval.phases) {
        const auto& by = ph.memory.peak_by_class;
        BOOST_TEST(by[static_cast<std::size_t>(planner::TensorClass::kOptimizerState)] == 0u);
        BOOST_TEST(by[static_cast<std::size_t>(planner::TensorClass::kGradAccumulators)] == 0u);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(equals_a_plain_forward) {
  const config::Config c = model(2);
  const engine::EvalResult got = evaluate(c);
  const engine::EvalResult want = reference(c);
  BOOST_TEST_MESSAGE("accuracy " << got.correct << "/" << got.n << ", loss " << got.loss);
  BOOST_TEST(got.n == want.n);
  BOOST_TEST(got.correct == want.correct);
  BOOST_TEST(got.loss == want.loss, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(got.batches == 4);  // shares of 50 and 51 samples, 14 a batch
  // Not the trivial answer: the trained model gets some right and some wrong.
  BOOST_TEST(got.correct > 10);
  BOOST_TEST(got.correct < got.n);
}

BOOST_AUTO_TEST_CASE(modes_io_modes_and_sharding_give_identical_results) {
  const config::Config ref = model(2);
  const engine::EvalResult expected = evaluate(ref);
  struct Variant {
    std::string name;
    std::function<void(config::Config&)> change;
  };
  const auto shard = [](config::Config& c, std::int64_t threshold) {
    c.sharding.enabled = true;
    c.sharding.threshold = threshold;
  };
  const std::vector<Variant> variants = {
      {"sharded threshold 1", [&](auto& c) { shard(c, 1); }},
      {"io", [](auto& c) { c.execution.io_mode = config::IoMode::kIo; }},
      {"io_overlapped", [](auto& c) { c.execution.io_mode = config::IoMode::kIoOverlapped; }},
      {"phased", [](auto& c) { c.execution.mode = config::ExecutionMode::kPhased; }},
      {"phased remote sharded io_overlapped",
       [&](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.remote = {true, true};
         shard(c, 8);
         c.execution.io_mode = config::IoMode::kIoOverlapped;
       }},
      {"off-chip optimizer", [](auto& c) { c.remote.optimizer_state = true; }},
  };
  for (const auto& v : variants) {
    BOOST_TEST_CONTEXT(v.name) {
      config::Config c = ref;
      v.change(c);
      BOOST_TEST(same(evaluate(c), expected));
      if (c.execution.io_mode != config::IoMode::kIoOverlapped) continue;
      for (const auto how : {engine::IoOverlap::kThread, engine::IoOverlap::kInline})
        BOOST_TEST(same(evaluate(c, how), expected));
    }
  }
}

BOOST_AUTO_TEST_CASE(replicas_and_micro_batches_change_only_the_rounding) {
  const engine::EvalResult expected = evaluate(model(2));
  for (const std::int64_t r : {1, 4}) {
    for (const std::int64_t mb : {1, 7, 200}) {
      BOOST_TEST_CONTEXT("R " << r << ", eval micro-batch " << mb) {
        config::Config c = model(r);
        c.eval.micro_batch_size = mb;
        const engine::EvalResult got = evaluate(c);
        BOOST_TEST(got.n == expected.n);
        BOOST_TEST(got.correct == expected.correct);
        BOOST_TEST(got.loss == expected.loss, boost::test_tools::tolerance(1e-6));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(measured_equals_planned_per_phase_and_replica) {
  const std::vector<std::pair<std::string, std::function<void(config::Config&)>>> cases = {
      {"standard", [](auto&) {}},
      {"phased remote sharded",
       [](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.remote = {true, true};
         c.sharding.enabled = true;
         c.sharding.threshold = 8;
       }},
      {"phased io_overlapped",
       [](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.execution.io_mode = config::IoMode::kIoOverlapped;
       }},
  };
  for (const auto& [name, change] : cases) {
    BOOST_TEST_CONTEXT(name) {
      config::Config c = model(2);
      change(c);
      const planner::Plan plan = planner::build_plan(c, Program::kEval);
      Engine e(plan, options());
      engine::copy_weights(trained(), e);
      (void)e.evaluate(test_set());
      const engine::MemoryReport report = e.memory_report();
      BOOST_REQUIRE_EQUAL(report.phases.size(), plan.phases.size());
      for (std::size_t p = 0; p < plan.phases.size(); ++p)
        for (std::size_t r = 0; r < 2; ++r) {
          BOOST_TEST_CONTEXT("phase '" << plan.phases[p].name << "', replica " << r) {
            const auto& got = report.phases[p][r];
            const auto& want = plan.phases[p].memory;
            BOOST_TEST(got.peak == want.peak);
            BOOST_TEST(got.always_live == want.always_live);
            BOOST_TEST(got.peak_by_class == want.peak_by_class, boost::test_tools::per_element());
          }
        }
      for (std::size_t r = 0; r < 2; ++r) {
        BOOST_TEST(report.peak_bytes[r] == plan.peak_bytes);
        BOOST_TEST(report.streaming_bytes[r] == plan.streaming_bytes);
      }
      BOOST_TEST(e.timings().steps == 4);  // one per batch
    }
  }
}

BOOST_AUTO_TEST_CASE(a_label_beyond_the_classes_is_refused) {
  // 12 classes of data for a model of 10: the scoring would read past the logits.
  const engine::Dataset data = engine::make_synthetic(30, kSide, kSide, 11, 0.8, 0, 12);
  Engine e(planner::build_plan(model(2), Program::kEval), options());
  BOOST_CHECK_EXCEPTION((void)e.evaluate(data), Error, [](const Error& err) {
    return std::string(err.what()).find("is not a class below 10") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(each_program_runs_only_its_own_verb) {
  const config::Config c = model(2);
  Engine eval(planner::build_plan(c, Program::kEval), options());
  engine::DatasetBatches batches(test_set(), 2, 2, 7);
  BOOST_CHECK_EXCEPTION(eval.train_step(batches), Error, [](const Error& e) {
    return std::string(e.what()) ==
           "train_step needs a training plan, but plan 'eval-test' is an evaluation plan";
  });
  Engine train(planner::build_plan(c), options());
  BOOST_CHECK_EXCEPTION((void)train.evaluate(test_set()), Error, [](const Error& e) {
    return std::string(e.what()) ==
           "evaluate needs an evaluation plan, but plan 'eval-test' is a training plan";
  });
}

BOOST_AUTO_TEST_SUITE_END()
