// The sharding, phasing, IO and sync modes the engine's bitwise equivalences run, each a
// change to a standard, unsharded config, and the loop that trains each against that
// config (plan_run_test.cpp with the MLP, gpt_equivalence_test.cpp with the GPT kinds).
#pragma once

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "engine/engine.h"

namespace popkit::engine::test {

struct Variant {
  std::string name;
  std::function<void(config::Config&)> change;
};

// R replicas in one group, "everyone", which groups the variables and the shards; each
// runs micro-batches of `micro_batch`, `accumulation` of them a step.
inline void replicate(config::Config& c, std::int64_t replicas, std::int64_t micro_batch,
                      std::int64_t accumulation) {
  c.replication.factor = replicas;
  c.replication.groupings = {{"everyone", replicas, 1}};
  c.variables.grouping = "everyone";
  c.sharding.grouping = "everyone";
  c.training.micro_batch_size = micro_batch;
  c.training.gradient_accumulation = accumulation;
}

inline void shard(config::Config& c, std::int64_t threshold) {
  c.sharding.enabled = true;
  c.sharding.threshold = threshold;
}

inline void io(config::Config& c, config::IoMode mode) {
  c.execution.io_mode = mode;
  c.execution.io_tiles = 32;
}

inline void phased(config::Config& c) {
  c.execution.mode = config::ExecutionMode::kPhased;
}

// Sharding thresholds of the model at hand: `some` shards some tensors of every layer,
// `one` a single tensor.
struct Thresholds {
  std::int64_t some = 16, one = 500;
};

// Sharding and IO modes in standard execution.
inline std::vector<Variant> standard_variants(const Thresholds& t) {
  return {
      {"sharded threshold 1", [](auto& c) { shard(c, 1); }},
      {"sharded threshold " + std::to_string(t.some), [t](auto& c) { shard(c, t.some); }},
      {"sharded threshold " + std::to_string(t.one), [t](auto& c) { shard(c, t.one); }},
      {"sharded weights only",
       [t](auto& c) {
         shard(c, t.some);
         c.sharding.optimizer_state = false;
       }},
      {"sharded optimizer state only",
       [t](auto& c) {
         shard(c, t.some);
         c.sharding.weights = false;
       }},
      {"io", [](auto& c) { io(c, config::IoMode::kIo); }},
      {"io_overlapped", [](auto& c) { io(c, config::IoMode::kIoOverlapped); }},
      {"off-chip optimizer", [](auto& c) { c.remote.optimizer_state = true; }},
      {"off-chip optimizer sharded",
       [](auto& c) {
         c.remote.optimizer_state = true;
         shard(c, 1);
       }},
      {"sync replica_and_ladder",
       [](auto& c) { c.execution.sync_pattern = config::SyncPattern::kReplicaAndLadder; }},
  };
}

// Phased execution (phases: auto) with remote variables, sharding, IO modes, sync
// patterns and preloads.
inline std::vector<Variant> phased_variants(const Thresholds& t) {
  return {
      {"phased", [](auto& c) { phased(c); }},
      {"phased, sync full",
       [](auto& c) {
         phased(c);
         c.execution.sync_pattern = config::SyncPattern::kFull;
       }},
      {"phased remote",
       [](auto& c) {
         phased(c);
         c.remote = {true, true};
       }},
      {"phased remote, sharded optimizer state only",
       [t](auto& c) {
         phased(c);
         c.remote = {true, true};
         shard(c, t.some);
         c.sharding.weights = false;
       }},
      {"phased remote sharded io, sync replica_and_ladder",
       [t](auto& c) {
         phased(c);
         c.remote = {true, true};
         shard(c, t.some);
         io(c, config::IoMode::kIo);
         c.execution.sync_pattern = config::SyncPattern::kReplicaAndLadder;
       }},
      {"phased remote sharded io_overlapped",
       [t](auto& c) {
         phased(c);
         c.remote = {true, true};
         shard(c, t.some);
         io(c, config::IoMode::kIoOverlapped);
       }},
      {"phased sharded io",
       [](auto& c) {
         phased(c);
         shard(c, 1);
         io(c, config::IoMode::kIo);
       }},
      {"phased remote sharded, preload",
       [t](auto& c) {
         phased(c);
         c.remote = {true, true};
         shard(c, t.some);
         c.execution.io_schedule = config::IoSchedule::kPreload;
       }},
      {"phased remote, preload, io_overlapped",
       [](auto& c) {
         phased(c);
         c.remote = {true, false};
         c.execution.io_schedule = config::IoSchedule::kPreload;
         io(c, config::IoMode::kIoOverlapped);
       }},
  };
}

inline std::vector<Variant> operator+(std::vector<Variant> a, std::vector<Variant> b) {
  for (Variant& v : b) a.push_back(std::move(v));
  return a;
}

// Each variant applied to `ref` gives `same` results as `ref` (io_overlapped both with
// its IO thread and inline, whatever this machine's core count picks). The variants run
// with every new tensor poisoned, so one that reads a tensor before writing it differs.
// `run(config, options)` trains a config; `same(a, b)` compares what two runs give.
template <typename Run, typename Same>
void expect_every_variant(const config::Config& ref, const std::vector<Variant>& variants,
                          const std::string& what, Run run, Same same, EngineOptions options) {
  const auto expected = run(ref, options);
  options.poison_new_tensors = true;
  for (const Variant& v : variants) {
    BOOST_TEST_CONTEXT(v.name << ", " << what) {
      config::Config c = ref;
      v.change(c);
      BOOST_TEST(same(run(c, options), expected));
      if (c.execution.io_mode != config::IoMode::kIoOverlapped) continue;
      for (const auto how : {IoOverlap::kThread, IoOverlap::kInline}) {
        BOOST_TEST_CONTEXT((how == IoOverlap::kThread ? "IO thread" : "inline")) {
          EngineOptions o = options;
          o.io_overlap = how;
          BOOST_TEST(same(run(c, o), expected));
        }
      }
    }
  }
}

}  // namespace popkit::engine::test
