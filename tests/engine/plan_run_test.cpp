// The engine running real plans from planner::build_plan on a small synthetic set:
// bitwise equivalence of sharding, modes and io modes; data parallelism against one big
// replica; groupings; measured against planned memory and bytes; errors; learning.
#include <algorithm>
#include <array>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "engine/engine.h"
#include "planner/build.h"
#include "planner/layer_ops.h"
#include "planner/schedule.h"
#include "planner/sync_groups.h"
#include "tests/engine/mode_variants.h"
#include "tests/engine/training.h"
#include "tests/support/test_profile.h"

using namespace popkit;
using engine::Engine;
using engine::test::all_state;
using engine::test::bitwise_equal;
using engine::test::options;
using engine::test::shard;

namespace {

constexpr std::int64_t kSide = 6;  // 6 x 6 images: 36 inputs

// Two dropout layers: every equivalence below holds with their masks (a sample's mask
// follows the seed, the step, its index in the global batch and the layer).
config::Config base_config(std::int64_t replicas, std::int64_t micro_batch,
                           std::int64_t accumulation) {
  config::Config c;
  c.name = "engine-test";
  c.model.input_shape = {kSide, kSide};
  using config::Activation;
  using config::make_layer;
  c.model.layers = {make_layer("fc1", "linear", {{"out_features", 16}, {"activation", "gelu"}}),
                    make_layer("drop1", "dropout", {{"rate", 0.25}}),
                    make_layer("fc2", "linear", {{"out_features", 16}, {"activation", "gelu"}}),
                    make_layer("fc3", "linear", {{"out_features", 16}, {"activation", "relu"}}),
                    make_layer("drop2", "dropout", {{"rate", 0.1}}),
                    make_layer("fc4", "linear", {{"out_features", 10}})};
  c.model.init.weights_std = 0.2;
  engine::test::replicate(c, replicas, micro_batch, accumulation);
  c.training.optimizer.lr = 1e-2;
  c.training.optimizer.attributes.set("bias_correction", true);
  c.training.optimizer.weight_decay = 1e-3;
  c.data.dataset = config::Dataset::kSynthetic;
  return ::popkit::test_support::with_test_profile(c);
}

// The model without its dropout layers.
void drop_dropout(config::Config& c) {
  std::erase_if(c.model.layers, [](const config::Layer& l) { return l.type == "dropout"; });
}

// The model with a layer norm after each linear layer but the last (its scale and shift
// trained, sharded and remote like any variable).
void add_layer_norms(config::Config& c) {
  std::vector<config::Layer> layers;
  for (std::size_t i = 0; i < c.model.layers.size(); ++i) {
    const config::Layer& l = c.model.layers[i];
    layers.push_back(l);
    if (l.type == "linear" && i + 1 < c.model.layers.size())
      layers.push_back(config::make_layer(l.name + "_ln", "layer_norm"));
  }
  c.model.layers = std::move(layers);
}

const engine::Dataset& train_set() {
  static const engine::Dataset d = engine::make_synthetic(600, kSide, kSide, 7, 0.3);
  return d;
}

// Runs `steps` optimizer steps over consecutive global batches of the training set;
// returns the losses.
std::vector<double> train(Engine& e, std::int64_t steps, std::int64_t first_batch = 0) {
  return engine::test::train_on(e, train_set(), steps, first_batch);
}

std::vector<std::vector<float>> run(const config::Config& c, std::int64_t steps,
                                    const engine::EngineOptions& o = options()) {
  Engine e(planner::build_plan(c), o);
  e.initialize();
  train(e, steps);
  return all_state(e);
}

// A replica's view of another engine's batches: replica r here is replica map[r] there.
class MappedBatches final : public engine::BatchSource {
 public:
  MappedBatches(const engine::BatchSource& inner, std::vector<std::int64_t> map)
      : inner_(inner), map_(std::move(map)) {}
  engine::MicroBatch micro_batch(std::int64_t r, std::int64_t s) const override {
    return inner_.micro_batch(map_[static_cast<std::size_t>(r)], s);
  }

 private:
  const engine::BatchSource& inner_;
  std::vector<std::int64_t> map_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(equivalence)

using engine::test::OptimizerCase;
std::vector<OptimizerCase> optimizer_cases() {
  return engine::test::optimizer_cases(base_config(1, 1, 1).training.optimizer);
}

// Each of the modes of mode_variants.h applied to `ref` trains 3 steps to the bits `ref`
// trains to. Thresholds 16: some tensors of every layer; 500: fc1.weight only.
void expect_every_mode_bitwise(const config::Config& ref, const std::string& what) {
  const engine::test::Thresholds t{.some = 16, .one = 500};
  engine::test::expect_every_variant(
      ref, engine::test::standard_variants(t) + engine::test::phased_variants(t), what,
      [](const config::Config& c, const engine::EngineOptions& o) { return run(c, 3, o); },
      bitwise_equal, options());
}

BOOST_AUTO_TEST_CASE(sharding_modes_and_io_modes_are_bitwise_identical) {
  for (const OptimizerCase& opt : optimizer_cases()) {
    config::Config ref = base_config(4, 2, 3);
    ref.training.optimizer = opt.optimizer;
    expect_every_mode_bitwise(ref, opt.name);
  }
}

// Layer norms (per-row statistics saved for the backward, a scale starting at 1) change
// none of it.
BOOST_AUTO_TEST_CASE(layer_norm_in_every_mode_is_bitwise_identical) {
  config::Config ref = base_config(4, 2, 3);
  add_layer_norms(ref);
  expect_every_mode_bitwise(ref, "layer norms");
}

// Batches that fail for some (replica, accumulation step): a host load error.
class FailingBatches final : public engine::BatchSource {
 public:
  FailingBatches(const engine::BatchSource& inner,
                 std::vector<std::pair<std::int64_t, std::int64_t>> failing)
      : inner_(inner), failing_(std::move(failing)) {}
  engine::MicroBatch micro_batch(std::int64_t r, std::int64_t s) const override {
    for (const auto& [fr, fs] : failing_)
      if (fr == r && fs == s) throw Error("no batch for replica {} step {}", r, s);
    return inner_.micro_batch(r, s);
  }

 private:
  const engine::BatchSource& inner_;
  std::vector<std::pair<std::int64_t, std::int64_t>> failing_;
};

BOOST_AUTO_TEST_CASE(a_failing_load_is_reported_alike_in_every_io_mode) {
  // Replica 1 fails at step 2 and replica 0 at step 3 of 4: every mode reports the
  // earliest step, however its loads were scheduled.
  struct Mode {
    config::IoMode io;
    engine::IoOverlap how;
  };
  for (const Mode m : {Mode{config::IoMode::kIo, engine::IoOverlap::kAuto},
                       Mode{config::IoMode::kIoOverlapped, engine::IoOverlap::kThread},
                       Mode{config::IoMode::kIoOverlapped, engine::IoOverlap::kInline}}) {
    BOOST_TEST_CONTEXT("io mode " << static_cast<int>(m.io) << ", overlap "
                                  << static_cast<int>(m.how)) {
      config::Config c = base_config(2, 2, 4);
      c.execution.mode = config::ExecutionMode::kPhased;
      c.execution.io_mode = m.io;
      engine::EngineOptions o = options();
      o.io_overlap = m.how;
      Engine e(planner::build_plan(c), o);
      e.initialize();
      engine::DatasetBatches batches(train_set(), 2, 4, 2);
      std::vector<std::int64_t> order(static_cast<std::size_t>(train_set().n));
      std::iota(order.begin(), order.end(), 0);
      batches.set_batch(order, 0);
      const FailingBatches failing(batches, {{0, 3}, {1, 2}});
      BOOST_CHECK_EXCEPTION(e.train_step(failing), Error, [](const Error& err) {
        return std::string(err.what()).find("no batch for replica 1 step 2") != std::string::npos;
      });
    }
  }
}

// Batches that log the order of the host loads, (replica, accumulation step), from
// every replica's thread; each load takes 0.5 ms, replica 1's 5 ms. With `hold`, replica
// 1's second load of step 0 (its labels) waits, at most 10 s, for replica 0 to load step
// 1: a replica that does not wait for replica 1 then runs ahead of it however the
// machine schedules the threads, and one that does wait times out into the wrong order.
class LoggedBatches final : public engine::BatchSource {
 public:
  LoggedBatches(const engine::BatchSource& inner, bool hold) : inner_(inner), hold_(hold) {}
  engine::MicroBatch micro_batch(std::int64_t r, std::int64_t s) const override {
    {
      std::unique_lock lock(mu_);
      const auto logged = [&](std::int64_t rr, std::int64_t ss) {
        return std::count(log_.begin(), log_.end(), std::pair{rr, ss});
      };
      if (hold_ && r == 1 && s == 0 && logged(1, 0) == 1)
        changed_.wait_for(lock, std::chrono::seconds(10), [&] { return logged(0, 1) > 0; });
      log_.emplace_back(r, s);
    }
    changed_.notify_all();
    // A load that takes a while, so that replicas on other threads run meanwhile, and
    // one replica slower, so that those that do not wait for it run ahead.
    std::this_thread::sleep_for(std::chrono::microseconds(r == 1 ? 5000 : 500));
    return inner_.micro_batch(r, s);
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> log() const {
    const std::lock_guard lock(mu_);
    return log_;
  }

 private:
  const engine::BatchSource& inner_;
  bool hold_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  mutable std::vector<std::pair<std::int64_t, std::int64_t>> log_;
};

BOOST_AUTO_TEST_CASE(host_loads_wait_as_the_sync_pattern_says) {
  // R 4, accumulation 4, replica 1's loads slow: each step's host loads (images, labels)
  // are a sync point.
  // full: no replica loads step s+1 before every replica has loaded step s.
  // replica_and_ladder: each ladder set (even, odd replicas) keeps that within itself,
  // and the sets do not wait for each other: replica 0 loads step 1 before the slow
  // replica 1 has loaded step 0's labels (which full forbids). The failing load is
  // reported alike (the earliest step, then the lowest replica).
  using config::SyncPattern;
  for (const SyncPattern pattern : {SyncPattern::kFull, SyncPattern::kReplicaAndLadder}) {
    BOOST_TEST_CONTEXT("pattern " << static_cast<int>(pattern)) {
      const bool ladder = pattern == SyncPattern::kReplicaAndLadder;
      config::Config c = base_config(4, 2, 4);
      c.execution.sync_pattern = pattern;
      Engine e(planner::build_plan(c), options());
      e.initialize();
      engine::DatasetBatches batches(train_set(), 4, 4, 2);
      std::vector<std::int64_t> order(static_cast<std::size_t>(train_set().n));
      std::iota(order.begin(), order.end(), 0);
      batches.set_batch(order, 0);
      const LoggedBatches logged(batches, ladder);
      e.train_step(logged);
      const auto log = logged.log();
      BOOST_REQUIRE_EQUAL(log.size(), 32u);  // 4 replicas x 4 steps x (images, labels)
      // at[r][s][k]: where replica r's k-th load of step s is in the log (images before
      // the forwards, labels before the loss: two IO chunks of the step).
      std::array<std::array<std::array<std::size_t, 2>, 4>, 4> at{};
      std::array<std::array<int, 4>, 4> seen{};
      for (std::size_t i = 0; i < log.size(); ++i) {
        const auto r = static_cast<std::size_t>(log[i].first);
        const auto s = static_cast<std::size_t>(log[i].second);
        BOOST_REQUIRE(seen[r][s] < 2);
        at[r][s][static_cast<std::size_t>(seen[r][s]++)] = i;
      }
      for (std::size_t s = 0; s < 4; ++s)
        for (std::size_t a = 0; a < 4; ++a)
          for (std::size_t b = 0; b < 4; ++b)
            BOOST_TEST_CONTEXT("step " << s << ", replicas " << a << " and " << b) {
              const bool group = !ladder || a % 2 == b % 2;
              if (group && s + 1 < 4) BOOST_TEST(at[a][s][1] < at[b][s + 1][0]);
            }
      // The even set does not wait for the odd one: its replica 0 runs ahead of replica 1.
      BOOST_TEST((at[0][1][0] < at[1][0][1]) == ladder);
      BOOST_TEST(e.timings().io_syncs > 0);
      const FailingBatches failing(batches, {{0, 3}, {1, 2}, {3, 2}});
      BOOST_CHECK_EXCEPTION(e.train_step(failing), Error, [](const Error& err) {
        return std::string(err.what()).find("no batch for replica 1 step 2") != std::string::npos;
      });
    }
  }
}

// dp and single train on the same global batches: after 3 steps every variable agrees to
// `tolerance` of its largest magnitude, but not bitwise (the sums run in another order).
void expect_data_parallel(const config::Config& dp_config, const config::Config& single_config,
                          const std::string& what, double tolerance = 2e-6) {
  const auto dp = run(dp_config, 3);
  const auto single = run(single_config, 3);
  const double worst = engine::test::largest_relative_difference(dp, single);
  BOOST_TEST_MESSAGE(what << ": largest difference relative to the variable's scale: " << worst);
  BOOST_TEST(worst < tolerance);
  BOOST_TEST(!bitwise_equal(dp, single));  // really a different computation
}

BOOST_AUTO_TEST_CASE(replicas_are_data_parallelism) {
  // 4 replicas x micro-batch 2 x accumulation 3 against 1 replica x micro-batch 24: the
  // same global batches, so the same weights up to float rounding. Tolerance: the
  // gradients differ by summation order only (~1e-7 relative); after 3 Adam steps every
  // variable agrees to 2e-6 of its largest magnitude (measured: 6e-7).
  // SGD with momentum likewise (the momentum buffer is a sum of the same gradients).
  for (const OptimizerCase& opt : optimizer_cases()) {
    if (opt.name != "adam" && opt.name != "sgd, nesterov momentum") continue;
    BOOST_TEST_CONTEXT(opt.name) {
      config::Config dp_config = base_config(4, 2, 3);
      config::Config single_config = base_config(1, 24, 1);
      dp_config.training.optimizer = single_config.training.optimizer = opt.optimizer;
      expect_data_parallel(dp_config, single_config, opt.name);
    }
  }
}

BOOST_AUTO_TEST_CASE(layer_norm_replicas_are_data_parallelism) {
  // As above with layer norms. A row's statistics and the shift's gradient (a column sum
  // of dy) are sums too, and Adam's first steps magnify a gradient's relative rounding
  // where the gradient is small: 1e-5 (measured: 2.7e-6).
  config::Config dp_config = base_config(4, 2, 3);
  config::Config single_config = base_config(1, 24, 1);
  add_layer_norms(dp_config);
  add_layer_norms(single_config);
  expect_data_parallel(dp_config, single_config, "layer norms", 1e-5);
}

BOOST_AUTO_TEST_CASE(dropout_is_applied_in_training) {
  // Rate 0 is the identity forward and backward: bitwise the model without the layers.
  // Rate 0.25 and 0.1 change the training (while every mode above agrees on it).
  config::Config with = base_config(2, 2, 3);
  config::Config zero = with;
  for (auto& l : zero.model.layers)
    if (l.type == "dropout") l.attributes.set("rate", 0.0);
  config::Config without = with;
  drop_dropout(without);
  const auto trained = run(with, 3);
  BOOST_TEST(bitwise_equal(run(zero, 3), run(without, 3)));
  BOOST_TEST(!bitwise_equal(trained, run(without, 3)));
}

BOOST_AUTO_TEST_CASE(groups_train_apart_and_replicas_of_a_group_agree) {
  // R = 4, variables grouped by stride: {0, 2} and {1, 3}, sharded inside the group.
  // Without dropout: a mask follows a sample's index in the global batch, and replica 2
  // of 4 holds other indices than replica 1 of the 2-replica engine below.
  config::Config c = base_config(4, 2, 2);
  drop_dropout(c);
  c.replication.groupings = {{"pairs", 2, 2}};
  c.variables = {"pairs", config::RetrievalMode::kAllReplicas};
  c.sharding.grouping = "pairs";
  shard(c, 16);
  Engine e(planner::build_plan(c), options());
  e.initialize();

  // The same steps on a 2-replica engine fed the data of replicas 0 and 2 only.
  config::Config c2 = base_config(2, 2, 2);
  drop_dropout(c2);
  Engine solo(planner::build_plan(c2), options());
  solo.initialize();

  engine::DatasetBatches batches(train_set(), 4, 2, 2);
  std::vector<std::int64_t> order(static_cast<std::size_t>(train_set().n));
  std::iota(order.begin(), order.end(), 0);
  for (std::int64_t s = 0; s < 3; ++s) {
    batches.set_batch(order, s);
    e.train_step(batches);
    solo.train_step(MappedBatches(batches, {0, 2}));
  }
  for (const auto& name : e.variable_names()) {
    BOOST_TEST_CONTEXT(name) {
      const auto per_replica = e.retrieve_variable(name);
      BOOST_REQUIRE_EQUAL(per_replica.size(), 4u);
      BOOST_TEST(per_replica[0] == per_replica[2], boost::test_tools::per_element());
      BOOST_TEST(per_replica[1] == per_replica[3], boost::test_tools::per_element());
      if (name.find("bias") == std::string::npos || name.find("adam") != std::string::npos)
        BOOST_TEST(per_replica[0] != per_replica[1]);
      BOOST_TEST(bitwise_equal({per_replica[0]}, {solo.read_variable(name)}));
    }
  }
}

BOOST_AUTO_TEST_CASE(one_per_group_retrieval) {
  config::Config c = base_config(4, 2, 1);
  c.replication.groupings = {{"halves", 2, 1}};
  c.variables = {"halves", config::RetrievalMode::kOnePerGroup};
  c.sharding.grouping = "halves";
  Engine e(planner::build_plan(c), options());
  e.initialize();
  train(e, 2);
  const auto groups = e.retrieve_variable("fc1.weight");
  BOOST_REQUIRE_EQUAL(groups.size(), 2u);
  BOOST_TEST(groups[0] == e.read_variable_of_replica("fc1.weight", 1),
             boost::test_tools::per_element());
  BOOST_TEST(groups[1] == e.read_variable_of_replica("fc1.weight", 3),
             boost::test_tools::per_element());
  BOOST_TEST(groups[0] != groups[1]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(measured_memory)

// Tensors share one block per replica (runtime/device_arena.h), so a new tensor holds
// whatever the last tensor at its offset left. Poisoning every new tensor with NaN bytes
// must change nothing: no op reads a tensor before writing it, in training (first
// accumulation step included) or evaluation.
BOOST_AUTO_TEST_CASE(no_op_reads_a_tensor_before_writing_it) {
  struct Case {
    std::string name;
    std::function<void(config::Config&)> change;
  };
  const std::vector<Case> cases = {
      {"standard", [](auto&) {}},
      {"standard sharded, off-chip optimizer",
       [](auto& c) {
         shard(c, 16);
         c.remote.optimizer_state = true;
       }},
      {"phased remote sharded",
       [](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.remote = {true, true};
         shard(c, 16);
       }},
      {"phased io_overlapped",
       [](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.execution.io_mode = config::IoMode::kIoOverlapped;
       }},
      {"sgd with momentum",
       [](auto& c) {
         config::set_optimizer_type(c.training.optimizer, "sgd");
         c.training.optimizer.attributes.set("momentum", 0.9);
       }},
  };
  for (const auto& k : cases) {
    BOOST_TEST_CONTEXT(k.name) {
      config::Config c = base_config(2, 3, 3);
      k.change(c);
      engine::EngineOptions poisoned = options();
      poisoned.poison_new_tensors = true;
      BOOST_TEST(bitwise_equal(run(c, 3, poisoned), run(c, 3)));
      // Evaluation, of the same trained weights.
      Engine trained(planner::build_plan(c), options());
      trained.initialize();
      train(trained, 2);
      auto evaluate = [&](const engine::EngineOptions& o) {
        Engine e(planner::build_plan(c, planner::Program::kEval), o);
        copy_weights(trained, e);
        return e.evaluate(train_set());
      };
      const auto clean = evaluate(options()), dirty = evaluate(poisoned);
      BOOST_TEST(dirty.correct == clean.correct);
      BOOST_TEST(std::memcmp(&dirty.loss, &clean.loss, sizeof clean.loss) == 0);
    }
  }
}

// The block is the planned peak plus fragmentation, not the sum of every tensor the plan
// allocates (what the engine held before: each tensor its own buffer).
BOOST_AUTO_TEST_CASE(a_replicas_block_is_about_its_planned_peak) {
  for (const auto mode : {config::ExecutionMode::kStandard, config::ExecutionMode::kPhased}) {
    BOOST_TEST_CONTEXT((mode == config::ExecutionMode::kPhased ? "phased" : "standard")) {
      config::Config c = base_config(2, 4, 2);
      c.execution.mode = mode;
      c.remote = {mode == config::ExecutionMode::kPhased, true};
      shard(c, 16);
      Engine e(planner::build_plan(c), options());
      const auto& p = e.plan();
      std::uint64_t every_tensor = 0;
      for (const auto& t : p.tensors) every_tensor += t.nbytes;
      BOOST_TEST_MESSAGE("peak " << p.peak_bytes << ", block " << e.device_block_bytes()
                                 << ", every tensor " << every_tensor);
      BOOST_TEST(e.device_block_bytes() >= p.peak_bytes);
      // 64-byte alignment adds under 64 bytes per live tensor; first fit a little more.
      BOOST_TEST(e.device_block_bytes() <= p.peak_bytes + p.peak_bytes / 4 + 64 * p.tensors.size());
      if (mode == config::ExecutionMode::kPhased) BOOST_TEST(e.device_block_bytes() < every_tensor);
    }
  }
}

BOOST_AUTO_TEST_CASE(measured_equals_planned_per_phase_replica_and_class) {
  struct Case {
    std::string name;
    std::function<void(config::Config&)> change;
  };
  const std::vector<Case> cases = {
      {"standard", [](auto&) {}},
      {"standard sharded", [](auto& c) { shard(c, 16); }},
      {"off-chip optimizer", [](auto& c) { c.remote.optimizer_state = true; }},
      {"off-chip optimizer sharded",
       [](auto& c) {
         c.remote.optimizer_state = true;
         shard(c, 16);
       }},
      {"phased", [](auto& c) { c.execution.mode = config::ExecutionMode::kPhased; }},
      {"phased remote sharded",
       [](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.remote = {true, true};
         shard(c, 16);
       }},
      {"phased remote io_overlapped float16",
       [](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.remote = {true, true};
         c.execution.io_mode = config::IoMode::kIoOverlapped;
         c.training.optimizer.attributes.set("first_order_dtype", "float16");
       }},
      {"phased remote sharded, preload",
       [](auto& c) {
         c.execution.mode = config::ExecutionMode::kPhased;
         c.remote = {true, true};
         shard(c, 16);
         c.execution.io_schedule = config::IoSchedule::kPreload;
       }},
      {"layer norms", [](auto& c) { add_layer_norms(c); }},
      {"layer norms, phased remote sharded io_overlapped",
       [](auto& c) {
         add_layer_norms(c);
         c.execution.mode = config::ExecutionMode::kPhased;
         c.remote = {true, true};
         shard(c, 16);
         c.execution.io_mode = config::IoMode::kIoOverlapped;
       }},
  };
  for (const auto& k : cases) {
    BOOST_TEST_CONTEXT(k.name) {
      config::Config c = base_config(2, 2, 2);
      k.change(c);
      const planner::Plan plan = planner::build_plan(c);
      Engine e(plan, options());
      e.initialize();
      train(e, 2);
      const auto report = e.memory_report();
      BOOST_REQUIRE_EQUAL(report.phases.size(), plan.phases.size());
      for (std::size_t p = 0; p < plan.phases.size(); ++p) {
        const auto& want = plan.phases[p].memory;
        for (std::size_t r = 0; r < 2; ++r) {
          BOOST_TEST_CONTEXT("phase '" << plan.phases[p].name << "', replica " << r) {
            const auto& got = report.phases[p][r];
            BOOST_TEST(got.peak == want.peak);
            BOOST_TEST(got.always_live == want.always_live);
            BOOST_TEST(got.not_always_live == want.not_always_live);
            BOOST_TEST(got.peak_by_class == want.peak_by_class, boost::test_tools::per_element());
          }
        }
      }
      for (std::size_t r = 0; r < 2; ++r) {
        BOOST_TEST(report.peak_bytes[r] == plan.peak_bytes);
        BOOST_TEST(report.always_live_bytes[r] == plan.always_live_bytes);
        BOOST_TEST(report.streaming_bytes[r] == plan.streaming_bytes);
      }
    }
  }
}

// Bytes per replica per optimizer step in a plan, and how many collectives of each kind
// (all_gather, reduce_scatter, all_reduce) a step runs.
struct PlannedBytes {
  std::uint64_t host = 0, remote = 0, collective = 0;
  std::array<std::uint64_t, 3> n_collectives{};
};

void count_collectives(const planner::Op& op, std::uint64_t times, PlannedBytes& p) {
  using planner::OpKind;
  if (op.kind == OpKind::kAllGather) p.n_collectives[0] += times;
  if (op.kind == OpKind::kReduceScatter) p.n_collectives[1] += times;
  if (op.kind == OpKind::kAllReduce) p.n_collectives[2] += times;
  for (const auto& inner : op.body)
    count_collectives(inner, times * static_cast<std::uint64_t>(op.steps), p);
}

PlannedBytes planned_bytes(const planner::Plan& plan) {
  PlannedBytes p;
  for (const auto& ph : plan.phases)
    for (const auto& op : ph.ops) {
      p.host += op.host_bytes;
      p.remote += op.remote_bytes;
      p.collective += op.collective_bytes;
      count_collectives(op, 1, p);
    }
  return p;
}

// Host and remote bytes are the same for every replica. Collective bytes are what the
// collectives copied between replicas, and members of a group move different bytes when a
// tensor does not split evenly (fc3.bias: 15 floats in owner chunks of 4 4 4 3;
// fc4.weight: 150 floats in shards of 38, the last 2 padding that is not sent): the plan,
// one for every replica, holds the mean over a group's members, so the measured bytes
// summed over the replicas are R times the plan's, to the byte for groups of 2 and 4.
BOOST_AUTO_TEST_CASE(bytes_moved_equal_the_plan) {
  struct Case {
    std::string name;
    std::int64_t replicas;
    std::function<void(config::Config&)> change;
    bool uneven;  // whether the replicas' collective bytes differ
  };
  const std::vector<Case> cases = {
      {"R = 2", 2, [](auto&) {}, false},
      {"R = 4", 4, [](auto&) {}, true},
      {"R = 4, reduced over all, sharded over pairs with stride 2", 4,
       [](auto& c) {
         c.replication.groupings.push_back({"pairs", 2, 2});
         c.sharding.grouping = "pairs";
       },
       true},
  };
  for (const Case& k : cases) {
    BOOST_TEST_CONTEXT(k.name) {
      config::Config c = base_config(k.replicas, 2, 3);
      c.execution.mode = config::ExecutionMode::kPhased;
      c.remote = {true, true};
      shard(c, 16);
      c.model.layers[3].attributes.set("out_features", 15);  // fc3
      k.change(c);
      const planner::Plan plan = planner::build_plan(c);
      const PlannedBytes want = planned_bytes(plan);
      for (const auto n : want.n_collectives) BOOST_TEST(n > 0u);  // all three kinds run
      Engine e(plan, options());
      e.initialize();
      train(e, 2);
      std::uint64_t sent = 0, received = 0;
      std::vector<std::uint64_t> per_replica;
      for (const auto& b : e.bytes_moved()) {
        BOOST_TEST(b.host_in + b.host_out == 2 * want.host);
        BOOST_TEST(b.remote_in + b.remote_out == 2 * want.remote);
        sent += b.collective_sent;
        received += b.collective_received;
        per_replica.push_back(b.collective_sent + b.collective_received);
      }
      BOOST_TEST(sent == received);
      BOOST_TEST(sent + received == static_cast<std::uint64_t>(k.replicas) * 2 * want.collective);
      const bool uneven = std::any_of(per_replica.begin(), per_replica.end(),
                                      [&](std::uint64_t b) { return b != per_replica[0]; });
      BOOST_TEST(uneven == k.uneven);
    }
  }
}

// Groups of 3: a collective's mean over the members is a whole number of bytes only when
// the tensor's size allows (fc4.bias, 10 floats all-reduced: 4 x 2 x 40 / 3 = 106.67
// bytes), and the plan rounds each op's mean down. The measured mean is then above the
// plan by less than a byte per collective.
BOOST_AUTO_TEST_CASE(bytes_moved_over_groups_of_three_round_down_per_op) {
  config::Config c = base_config(3, 2, 3);
  c.execution.mode = config::ExecutionMode::kPhased;
  c.remote = {true, true};
  shard(c, 16);
  const planner::Plan plan = planner::build_plan(c);
  const PlannedBytes want = planned_bytes(plan);
  const std::uint64_t n_collectives =
      want.n_collectives[0] + want.n_collectives[1] + want.n_collectives[2];
  Engine e(plan, options());
  e.initialize();
  train(e, 2);
  std::uint64_t moved = 0;
  for (const auto& b : e.bytes_moved()) moved += b.collective_sent + b.collective_received;
  BOOST_TEST(moved % 2 == 0u);  // two equal steps
  const std::uint64_t per_step = moved / 2;
  BOOST_TEST(per_step >= 3 * want.collective);
  BOOST_TEST(per_step < 3 * (want.collective + n_collectives));
  BOOST_TEST(per_step != 3 * want.collective);  // the rounding shows
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(engine_run)

BOOST_AUTO_TEST_CASE(training_lowers_the_loss) {
  config::Config c = base_config(2, 8, 2);
  c.execution.mode = config::ExecutionMode::kPhased;
  c.remote = {true, true};
  shard(c, 16);
  Engine e(planner::build_plan(c), options());
  e.initialize();
  const auto losses = train(e, 36);
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  const double last = (losses[33] + losses[34] + losses[35]) / 3;
  BOOST_TEST_MESSAGE("loss " << first << " -> " << last);
  BOOST_TEST(last < 0.5 * first);
  config::Config ec = c;
  ec.eval.micro_batch_size = 50;
  Engine evaluator(planner::build_plan(ec, planner::Program::kEval), options());
  copy_weights(e, evaluator);
  const auto eval = evaluator.evaluate(train_set());
  BOOST_TEST(eval.n == train_set().n);
  BOOST_TEST(eval.accuracy > 0.8);
  BOOST_TEST(e.timings().steps == 36);
  BOOST_TEST(e.timings().phase_seconds.size() == e.plan().phases.size());
}

namespace {

// The runs of transfers a schedule's groups start together in one execution of `list`
// for `steps` steps: each io chunk of a synced segment, counted once under full (its
// lanes meet) and once per ladder set under replica_and_ladder (each set waits for its
// own).
std::int64_t synced_transfers(const std::vector<planner::Op>& ops, const planner::OpsSchedule& list,
                              std::int64_t steps) {
  using planner::ScheduleItem;
  using planner::SegmentRun;
  auto segment = [](const ScheduleItem& item) -> std::int64_t {
    if (item.run != SegmentRun::kLockstep && item.run != SegmentRun::kLadder) return 0;
    std::int64_t io = 0;
    for (const auto& c : item.chunks) io += c.io() ? 1 : 0;
    return item.run == SegmentRun::kLadder ? 2 * io : io;
  };
  std::int64_t n = 0;
  for (const ScheduleItem& item : list.items) {
    if (item.kind == ScheduleItem::Kind::kSegment)
      n += segment(item) * (list.across_steps ? steps : 1);
    if (item.kind == ScheduleItem::Kind::kRepeat && !item.io_thread)
      n += synced_transfers(ops[item.first].body, item.body.front(), ops[item.first].steps);
  }
  return list.across_steps ? n : n * steps;
}

}  // namespace

// The engine runs the plan's schedule (planner/schedule.h), the one the cost model
// prices: its replicas start together exactly the runs of transfers the schedule's
// synced chunks say, under full and replica_and_ladder, phased and standard.
BOOST_AUTO_TEST_CASE(the_engine_syncs_where_the_schedule_says) {
  using config::SyncPattern;
  for (const SyncPattern pattern : {SyncPattern::kFull, SyncPattern::kReplicaAndLadder})
    for (const std::int64_t replicas : {2, 4})
      for (const bool phased : {false, true}) {
        BOOST_TEST_CONTEXT("pattern " << static_cast<int>(pattern) << ", R " << replicas
                                      << (phased ? ", phased" : ", standard")) {
          config::Config c = base_config(replicas, 2, 3);
          c.execution.sync_pattern = pattern;
          if (phased) {
            c.execution.mode = config::ExecutionMode::kPhased;
            c.remote = {true, true};
          }
          const planner::Plan plan = planner::build_plan(c);
          Engine e(plan, options());
          e.initialize();
          train(e, 2);
          const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
          const planner::Schedule s = planner::schedule(
              plan, {replicas, e.n_threads(), cores, planner::IoThreadUse::kAuto});
          std::int64_t per_step = 0;
          for (std::size_t p = 0; p < plan.phases.size(); ++p)
            per_step += synced_transfers(plan.phases[p].ops, s.phases[p].ops, 1);
          BOOST_TEST(e.timings().io_syncs == 2 * per_step);
          // Full syncs every replica: R 2 does too; a ladder set of R 2 is one replica.
          BOOST_TEST((per_step > 0) == (pattern == SyncPattern::kFull || replicas == 4));
        }
      }
}

BOOST_AUTO_TEST_CASE(a_plan_that_does_not_fit_is_refused) {
  config::Config c = base_config(2, 2, 1);
  c.device.memory_per_replica = 1000;
  const planner::Plan plan = planner::build_plan(c);
  BOOST_REQUIRE(!plan.fits);
  BOOST_CHECK_EXCEPTION(Engine(plan, options()), Error, [&](const Error& e) {
    const std::string m = e.what();
    return m.find("does not fit device memory") != std::string::npos &&
           m.find(plan.not_fitting.phase) != std::string::npos &&
           m.find(plan.not_fitting.suggestions.at(0)) != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(nan_names_step_phase_and_tensor) {
  config::Config c = base_config(2, 2, 2);
  c.execution.mode = config::ExecutionMode::kPhased;
  Engine e(planner::build_plan(c), options());
  e.initialize();
  train(e, 1);
  std::vector<float> w = e.read_variable("fc4.weight");
  w[3] = std::nanf("");
  e.write_variable("fc4.weight", w);
  BOOST_CHECK_EXCEPTION(train(e, 1), Error, [](const Error& err) {
    BOOST_TEST_MESSAGE(err.what());
    return std::string(err.what())
        .starts_with(
            "optimizer step 2, phase 'fc4 forward+loss+backward+optimizer': the loss 'loss' of "
            "replica 0 "
            "at accumulation step 0 is nan");
  });
}

BOOST_AUTO_TEST_CASE(shapes_that_disagree_with_the_plan) {
  config::Config c = base_config(1, 2, 1);
  planner::Plan plan = planner::build_plan(c);
  for (auto& t : plan.tensors)
    if (t.name == "fc4.weight") {
      t.shape = {16, 9};
      t.nelms = 144;
      t.nbytes = 576;
    }
  BOOST_CHECK_EXCEPTION(Engine(plan, options()), Error, [](const Error& e) {
    BOOST_TEST_MESSAGE(e.what());
    return std::string(e.what()).find(
               "tensor 'fc4.weight' has shape [16, 9] but the weight needs [16, 10]") !=
           std::string::npos;
  });
  // A micro-batch of the wrong size.
  Engine ok(planner::build_plan(c), options());
  engine::DatasetBatches wrong(train_set(), 1, 1, 3);
  wrong.set_batch(std::vector<std::int64_t>{0, 1, 2});
  BOOST_CHECK_EXCEPTION(ok.train_step(wrong), Error, [](const Error& e) {
    BOOST_TEST_MESSAGE(e.what());
    return std::string(e.what()).find("has 3 samples") != std::string::npos &&
           std::string(e.what()).find("shape [2, 36]") != std::string::npos;
  });
}

// Every op of the plan, repeat bodies included.
void for_each_op(planner::Plan& plan, const std::function<void(planner::Op&)>& fn) {
  std::function<void(std::vector<planner::Op>&)> walk = [&](std::vector<planner::Op>& ops) {
    for (planner::Op& op : ops) {
      fn(op);
      walk(op.body);
    }
  };
  walk(plan.setup);
  for (planner::Phase& ph : plan.phases) walk(ph.ops);
}

// The tensor in position (role, index) of the ops of `kind` of layer `layer`: each one.
std::vector<int*> layer_operands(planner::Plan& plan, const std::string& layer,
                                 planner::OpKind kind, planner::OperandRole role, int index) {
  std::vector<int*> out;
  for_each_op(plan, [&](planner::Op& op) {
    if (op.kind != kind || plan.layers.at(static_cast<std::size_t>(op.layer)).name != layer) return;
    const planner::LayerKind& k = planner::layer_kind(plan.layers[op.layer].kind);
    const int t = planner::layer_operand(op, k, role, index);
    for (auto* list : {&op.inputs, &op.outputs, &op.state})
      for (int& slot : *list)
        if (slot == t && t >= 0) out.push_back(&slot);
  });
  return out;
}

void reshape(planner::Plan& plan, int t, planner::Shape shape, planner::DType dtype) {
  planner::DeviceTensor& d = plan.tensors.at(static_cast<std::size_t>(t));
  d.shape = std::move(shape);
  d.dtype = dtype;
  d.nelms = std::accumulate(d.shape.begin(), d.shape.end(), std::int64_t{1}, std::multiplies<>());
  d.nbytes = static_cast<std::uint64_t>(d.nelms * planner::dtype_size(dtype));
}

// The engine holds each kind's ops to the operands its planner entry declares, and each
// layer to its kind's rules; no kind writes checks of its own.
BOOST_AUTO_TEST_CASE(every_kind_is_held_to_what_its_entry_declares) {
  using planner::OpKind;
  using R = planner::OperandRole;
  config::Config c = base_config(1, 2, 1);
  add_layer_norms(c);
  const planner::Plan good = planner::build_plan(c);
  BOOST_REQUIRE_NO_THROW(Engine(good, options()));
  const auto refused = [&](const std::function<void(planner::Plan&)>& spoil,
                           const std::string& want) {
    planner::Plan p = good;
    spoil(p);
    std::string got = "(accepted)";
    try {
      Engine e(p, options());
    } catch (const Error& e) {
      got = e.what();
    }
    BOOST_TEST(got.find(want) != std::string::npos, got << " does not say: " << want);
  };
  const auto first = [](std::vector<int*> slots) {
    BOOST_REQUIRE(!slots.empty());
    return *slots.front();
  };
  refused(
      [&](planner::Plan& p) {
        reshape(p, first(layer_operands(p, "fc1_ln", OpKind::kForward, R::kSaved, 1)), {3},
                planner::DType::kFloat32);
      },
      "has shape [3] but the row reciprocal deviations needs [2]");
  refused(
      [&](planner::Plan& p) {
        reshape(p, first(layer_operands(p, "drop1", OpKind::kForward, R::kOut, 0)), {2, 15},
                planner::DType::kFloat32);
      },
      "has shape [2, 15] but the layer output needs [2, 16]");
  refused(
      [&](planner::Plan& p) {
        for (int* slot : layer_operands(p, "fc2", OpKind::kBackward, R::kSaved, 0)) *slot = -1;
      },
      "layer fc2: the pre-activation is missing");
  refused(
      [&](planner::Plan& p) {
        for (planner::DeviceTensor& t : p.tensors)
          if (t.name == "fc2.weight.adam_v")
            reshape(p, static_cast<int>(&t - p.tensors.data()), t.shape, planner::DType::kFloat16);
      },
      "'fc2.weight.adam_v' must be float32");
  refused(
      [&](planner::Plan& p) {
        for (planner::LayerInfo& l : p.layers)
          if (l.name == "drop1") l.attributes.set("rate", 1.5);
      },
      "plan: layer drop1.rate: a dropout rate must be in [0, 1), got 1.5");
}

BOOST_AUTO_TEST_CASE(initial_values_do_not_depend_on_r_mode_or_sharding) {
  config::Config a = base_config(1, 2, 1);
  config::Config b = base_config(4, 2, 1);
  b.execution.mode = config::ExecutionMode::kPhased;
  b.remote = {true, true};
  shard(b, 1);
  Engine ea(planner::build_plan(a), options());
  Engine eb(planner::build_plan(b), options());
  ea.initialize();
  eb.initialize();
  BOOST_TEST(bitwise_equal(all_state(ea), all_state(eb)));
  const auto bias = ea.read_variable("fc1.bias");
  BOOST_TEST(std::all_of(bias.begin(), bias.end(), [](float x) { return x == 0.0f; }));
}

BOOST_AUTO_TEST_CASE(a_layer_norm_starts_as_the_identity_whatever_model_init) {
  config::Config c = base_config(2, 2, 1);
  add_layer_norms(c);
  c.model.init.biases_zero = false;  // normal biases: the layer norm's shift stays 0
  shard(c, 1);
  Engine e(planner::build_plan(c), options());
  e.initialize();
  for (std::int64_t g = 0; g < e.plan().variables_grouping.n_groups(); ++g) {
    const auto scale = e.read_variable("fc1_ln.scale", g);
    const auto shift = e.read_variable("fc1_ln.shift", g);
    BOOST_TEST(scale.size() == 16u);
    BOOST_TEST(std::all_of(scale.begin(), scale.end(), [](float x) { return x == 1.0f; }));
    BOOST_TEST(std::all_of(shift.begin(), shift.end(), [](float x) { return x == 0.0f; }));
  }
  const auto bias = e.read_variable("fc1.bias");
  BOOST_TEST(std::any_of(bias.begin(), bias.end(), [](float x) { return x != 0.0f; }));
}

// What initialize writes is each variable's initialiser in the plan, not a rule of the
// engine's: a plan that asks for ones (or another normal) gets them.
BOOST_AUTO_TEST_CASE(initial_values_are_the_plans) {
  planner::Plan plan = planner::build_plan(base_config(2, 2, 1));
  const auto index = [&](const std::string& name) {
    for (std::size_t i = 0; i < plan.variables.size(); ++i)
      if (plan.variables[i].name == name) return i;
    BOOST_FAIL("no variable " << name);
    return std::size_t{0};
  };
  plan.variables[index("fc2.bias")].init = {planner::InitKind::kOnes};
  plan.variables[index("fc1.weight")].init = {planner::InitKind::kNormal, 3.0, 0.5};
  plan.init_seed = 11;
  Engine e(plan, options());
  e.initialize();
  const auto ones = e.read_variable("fc2.bias");
  BOOST_TEST(std::all_of(ones.begin(), ones.end(), [](float x) { return x == 1.0f; }));
  const auto w = e.read_variable("fc1.weight");
  double mean = 0;
  for (float x : w) mean += x;
  mean /= static_cast<double>(w.size());
  BOOST_TEST(std::abs(mean - 3.0) < 0.05);  // 576 samples of std 0.5: 0.02 is 1 sigma
  const auto zeros = e.read_variable("fc1.bias");
  BOOST_TEST(std::all_of(zeros.begin(), zeros.end(), [](float x) { return x == 0.0f; }));
}

BOOST_AUTO_TEST_SUITE_END()

// Pipelined execution (issue 16): a worker per (replica, stage), transfers as copies
// between the stages' devices; the same micro-batches accumulated in the same order, so
// the weights, the optimizer state and the evaluation are bitwise those of the same
// config without pipelining; memory measured per stage and replica equals the plan's.
BOOST_AUTO_TEST_SUITE(pipeline)

namespace {

config::Config pipelined(std::int64_t replicas, std::int64_t stages) {
  config::Config c = base_config(replicas, 2, 2 * stages);
  c.pipeline.stages = stages;
  return c;
}

// A batch source that fails at one micro-batch, as a bad sample would.
class FailingBatches final : public engine::BatchSource {
 public:
  FailingBatches(const engine::BatchSource& inner, std::int64_t bad) : inner_(inner), bad_(bad) {}
  engine::MicroBatch micro_batch(std::int64_t r, std::int64_t s) const override {
    if (s == bad_) throw Error("micro-batch {} of replica {} is unreadable", s, r);
    return inner_.micro_batch(r, s);
  }

 private:
  const engine::BatchSource& inner_;
  std::int64_t bad_;
};

// Logs each host load's start and end, (replica, micro-batch), from every stage's
// thread; replica 1's loads take `slow`, replica 0's none, so that a replica nothing
// holds back runs ahead.
class TimedLoads final : public engine::BatchSource {
 public:
  struct Event {
    std::int64_t replica = 0, micro_batch = 0;
    bool start = true;
  };
  TimedLoads(const engine::BatchSource& inner, std::chrono::microseconds slow)
      : inner_(inner), slow_(slow) {}
  engine::MicroBatch micro_batch(std::int64_t r, std::int64_t s) const override {
    note({r, s, true});
    if (r == 1) std::this_thread::sleep_for(slow_);
    auto mb = inner_.micro_batch(r, s);
    note({r, s, false});
    return mb;
  }
  std::vector<Event> log() const {
    const std::lock_guard lock(mu_);
    return log_;
  }

 private:
  void note(Event e) const {
    const std::lock_guard lock(mu_);
    log_.push_back(e);
  }
  const engine::BatchSource& inner_;
  std::chrono::microseconds slow_;
  mutable std::mutex mu_;
  mutable std::vector<Event> log_;
};

// The cycle (planner/sync_groups.h) of each load in `log`: a replica's first load of a
// micro-batch is stage 0's images, its second the last stage's labels.
std::vector<std::int64_t> load_cycles(const planner::Plan& plan,
                                      const std::vector<TimedLoads::Event>& log) {
  const planner::PipelineCycles cycles = planner::pipeline_cycles(plan);
  auto forward_cycle = [&](std::int64_t stage, std::int64_t mb) {
    for (std::size_t p = 0; p < plan.phases.size(); ++p) {
      if (plan.phases[p].stage != stage) continue;
      const auto& slots = plan.phases[p].slots;
      for (std::size_t k = 0; k < slots.size(); ++k)
        if (slots[k].work == planner::PipelineWork::kForward && slots[k].micro_batch == mb)
          return cycles.slot_cycle[p][k];
    }
    BOOST_FAIL("no forward of micro-batch " << mb << " on stage " << stage);
    return std::int64_t{-1};
  };
  const auto last = static_cast<std::int64_t>(plan.pipeline->stages.size()) - 1;
  std::map<std::pair<std::int64_t, std::int64_t>, int> seen;
  std::vector<std::int64_t> out;
  for (const auto& e : log) {
    if (!e.start) continue;
    const int k = seen[{e.replica, e.micro_batch}]++;
    out.push_back(forward_cycle(k == 0 ? 0 : last, e.micro_batch));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(host_loads_wait_as_the_sync_pattern_says) {
  // R 2 x S 3, replica 1's loads slow (20 ms each), one step (GA 6). The loads' cycles
  // in the order they started:
  //  - full: every device meets at every cycle, so the order never goes back a cycle;
  //  - single_pipeline: no meetings, and replica 0 runs cycles ahead of replica 1's
  //    first loads (the check above can fail);
  //  - replica_and_ladder (R 2 x S 2: the sets are the stages 0 and the stages 1): each
  //    set's loads in cycle order.
  using config::SyncPattern;
  struct Case {
    SyncPattern pattern;
    std::int64_t stages;
  };
  for (const Case k : {Case{SyncPattern::kFull, 3}, Case{SyncPattern::kSinglePipeline, 3},
                       Case{SyncPattern::kReplicaAndLadder, 2}}) {
    BOOST_TEST_CONTEXT("pattern " << static_cast<int>(k.pattern)) {
      config::Config c = pipelined(2, k.stages);
      c.training.gradient_accumulation = 6;
      c.execution.sync_pattern = k.pattern;
      const planner::Plan plan = planner::build_plan(c);
      Engine e(plan, options());
      e.initialize();
      engine::DatasetBatches batches(train_set(), 2, 6, 2);
      std::vector<std::int64_t> order(static_cast<std::size_t>(train_set().n));
      std::iota(order.begin(), order.end(), 0);
      batches.set_batch(order, 0);
      const TimedLoads timed(batches, std::chrono::milliseconds(20));
      e.train_step(timed);
      const auto log = timed.log();
      BOOST_REQUIRE_EQUAL(log.size(), 2u * 2 * 6 * 2);  // R x GA x (images, labels), start/end
      const auto cycle = load_cycles(plan, log);
      std::vector<bool> images_set;  // each started load: stage 0's (ladder set 0) or not
      {
        std::map<std::pair<std::int64_t, std::int64_t>, int> seen;
        for (const auto& ev : log)
          if (ev.start) images_set.push_back(seen[{ev.replica, ev.micro_batch}]++ == 0);
      }
      auto in_cycle_order = [&](auto&& keep) {
        std::int64_t latest = -1;
        for (std::size_t i = 0; i < cycle.size(); ++i) {
          if (!keep(i)) continue;
          if (cycle[i] < latest) return false;
          latest = cycle[i];
        }
        return true;
      };
      switch (k.pattern) {
        case SyncPattern::kFull:
          BOOST_TEST(in_cycle_order([](std::size_t) { return true; }));
          BOOST_TEST(e.timings().io_syncs > 0);
          break;
        case SyncPattern::kSinglePipeline:
          BOOST_TEST(!in_cycle_order([](std::size_t) { return true; }));
          BOOST_TEST(e.timings().io_syncs == 0);
          break;
        case SyncPattern::kReplicaAndLadder: {
          for (const bool set : {true, false})
            BOOST_TEST(in_cycle_order([&](std::size_t i) { return images_set[i] == set; }),
                       "set " << (set ? 0 : 1));
          BOOST_TEST(e.timings().io_syncs > 0);
          break;
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_sync_pattern_changes_no_weight) {
  // R 2 x S 3 under each pattern: bitwise the weights of the config without pipelining.
  using config::SyncPattern;
  config::Config plain = pipelined(2, 3);
  plain.pipeline.stages = 1;
  Engine flat(planner::build_plan(plain), options());
  flat.initialize();
  const auto lf = train(flat, 2);
  for (const SyncPattern pattern :
       {SyncPattern::kFull, SyncPattern::kSinglePipeline, SyncPattern::kReplicaAndLadder}) {
    BOOST_TEST_CONTEXT("pattern " << static_cast<int>(pattern)) {
      config::Config c = pipelined(2, 3);
      c.execution.sync_pattern = pattern;
      Engine piped(planner::build_plan(c), options());
      piped.initialize();
      const auto lp = train(piped, 2);
      BOOST_TEST(std::memcmp(lp.data(), lf.data(), lp.size() * sizeof(double)) == 0);
      BOOST_TEST(bitwise_equal(all_state(piped), all_state(flat)));
    }
  }
}

BOOST_AUTO_TEST_CASE(weights_and_evaluation_are_bitwise_those_without_pipelining) {
  for (std::int64_t S = 2; S <= 4; ++S)
    for (std::int64_t R : {1, 2})
      for (bool sharded : {false, true}) {
        if (sharded && R == 1) continue;
        BOOST_TEST_CONTEXT("S " << S << " R " << R << (sharded ? " sharded" : "")) {
          config::Config c = pipelined(R, S);
          if (sharded) shard(c, 16);
          config::Config plain = c;
          plain.pipeline.stages = 1;
          Engine piped(planner::build_plan(c), options());
          Engine flat(planner::build_plan(plain), options());
          for (Engine* e : {&piped, &flat}) e->initialize();
          const auto lp = train(piped, 3), lf = train(flat, 3);
          BOOST_TEST(std::memcmp(lp.data(), lf.data(), lp.size() * sizeof(double)) == 0);
          BOOST_TEST(bitwise_equal(all_state(piped), all_state(flat)));
          BOOST_TEST(piped.timings().pipeline_bubble.size() == 3u);
          for (double b : piped.timings().pipeline_bubble) BOOST_TEST((b >= 0.0 && b < 1.0));
          auto evaluate = [&](const config::Config& cfg, const Engine& trained) {
            Engine e(planner::build_plan(cfg, planner::Program::kEval), options());
            copy_weights(trained, e);
            return e.evaluate(train_set());
          };
          const auto ep = evaluate(c, piped), ef = evaluate(plain, flat);
          BOOST_TEST(ep.correct == ef.correct);
          BOOST_TEST(std::memcmp(&ep.loss, &ef.loss, sizeof ep.loss) == 0);
        }
      }
}

BOOST_AUTO_TEST_CASE(layer_norm_weights_are_bitwise_those_without_pipelining) {
  for (std::int64_t S : {2, 3}) {
    BOOST_TEST_CONTEXT("S " << S) {
      config::Config c = pipelined(2, S);
      add_layer_norms(c);
      shard(c, 16);
      config::Config plain = c;
      plain.pipeline.stages = 1;
      BOOST_TEST(bitwise_equal(run(c, 3), run(plain, 3)));
    }
  }
}

BOOST_AUTO_TEST_CASE(measured_memory_equals_planned_per_stage_and_replica) {
  for (std::int64_t S : {2, 3}) {
    config::Config c = pipelined(2, S);
    shard(c, 16);
    const planner::Plan plan = planner::build_plan(c);
    engine::EngineOptions poisoned = options();
    poisoned.poison_new_tensors = true;  // nothing reads a tensor before writing it
    Engine e(plan, poisoned);
    e.initialize();
    const auto losses = train(e, 2);
    for (double l : losses) BOOST_TEST(std::isfinite(l));
    const auto report = e.memory_report();
    BOOST_REQUIRE_EQUAL(report.phases.size(), static_cast<std::size_t>(S));
    for (std::size_t p = 0; p < plan.phases.size(); ++p)
      for (std::size_t r = 0; r < 2; ++r) {
        BOOST_TEST_CONTEXT("stage " << plan.phases[p].stage << ", replica " << r) {
          const auto& want = plan.phases[p].memory;
          const auto& got = report.phases[p][r];
          BOOST_TEST(got.peak == want.peak);
          BOOST_TEST(got.always_live == want.always_live);
          BOOST_TEST(got.peak_by_class == want.peak_by_class, boost::test_tools::per_element());
        }
      }
    for (std::size_t r = 0; r < 2; ++r) BOOST_TEST(report.peak_bytes[r] == plan.peak_bytes);
  }
}

// A stage that fails stops every worker (no stage waits forever for a transfer), and the
// failure reported is the stage's own, not another worker's stop.
BOOST_AUTO_TEST_CASE(a_failing_stage_stops_every_worker) {
  const config::Config c = pipelined(2, 3);
  Engine e(planner::build_plan(c), options());
  e.initialize();
  const auto& p = e.plan();
  engine::DatasetBatches batches(train_set(), p.replication_factor, p.gradient_accumulation,
                                 p.micro_batch_size);
  std::vector<std::int64_t> order(static_cast<std::size_t>(train_set().n));
  std::iota(order.begin(), order.end(), 0);
  batches.set_batch(order, 0);
  const FailingBatches failing(batches, 3);
  BOOST_CHECK_EXCEPTION(e.train_step(failing), Error, [](const Error& err) {
    return std::string(err.what()).find("micro-batch 3 of replica") != std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
