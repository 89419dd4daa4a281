// Planning speed and plan size: a 1000-layer model with replication factor 1024 must
// plan in under 100 ms (issue 4), and the plan's size must grow with the layers, never
// with the replicas. Counters report ops, tensors and buffers so the second claim is
// visible next to the time: the factor 2 and factor 1024 rows must count the same.
#include <benchmark/benchmark.h>

#include "config/config.h"
#include "config/layer_kinds.h"
#include "planner/build.h"
#include "tests/support/test_profile.h"

namespace {

// n_layers linear layers of 256 (GELU), the last one 10 classes; everyone shares one
// grouping, RTS over all replicas, weights and optimizer state remote, phased with
// accumulation 4: the shape of the MNIST phased example, scaled up.
popkit::config::Config deep_config(int n_layers, std::int64_t factor) {
  popkit::config::Config c;
  c.name = "deep";
  c.model.input_shape = {28, 28};
  for (int i = 0; i < n_layers; ++i)
    c.model.layers.push_back(
        popkit::config::make_layer("fc" + std::to_string(i + 1), "linear",
                                   {{"out_features", i + 1 == n_layers ? 10 : 256},
                                    {"activation", i + 1 == n_layers ? "none" : "gelu"}}));
  c.replication.factor = factor;
  c.replication.groupings = {{"everyone", factor, 1}};
  c.variables.grouping = "everyone";
  c.sharding.enabled = factor > 1;
  c.sharding.threshold = 1024;
  c.remote = {true, true};
  c.execution.mode = popkit::config::ExecutionMode::kPhased;
  c.execution.io_mode = popkit::config::IoMode::kIo;
  c.execution.io_tiles = 32;
  c.training.micro_batch_size = 8;
  c.training.gradient_accumulation = 4;
  c.device.profile = "ipu-mk2";
  return ::popkit::test_support::with_test_profile(c);
}

std::size_t count_ops(const std::vector<popkit::planner::Op>& ops) {
  std::size_t n = ops.size();
  for (const auto& op : ops) n += count_ops(op.body);
  return n;
}

void BM_BuildPlan(benchmark::State& state) {
  const auto config = deep_config(static_cast<int>(state.range(0)), state.range(1));
  std::size_t n_ops = 0, n_tensors = 0, n_buffers = 0;
  for (auto _ : state) {
    auto plan = popkit::planner::build_plan(config);
    benchmark::DoNotOptimize(plan.peak_bytes);
    n_ops = count_ops(plan.setup);
    for (const auto& ph : plan.phases) n_ops += count_ops(ph.ops);
    n_tensors = plan.tensors.size();
    n_buffers = plan.buffers.size();
  }
  state.counters["ops"] = static_cast<double>(n_ops);
  state.counters["tensors"] = static_cast<double>(n_tensors);
  state.counters["buffers"] = static_cast<double>(n_buffers);
}
BENCHMARK(BM_BuildPlan)
    ->ArgNames({"layers", "factor"})
    ->Args({250, 1024})
    ->Args({1000, 2})
    ->Args({1000, 1024})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
