// How planning and setup scale with the number of layers: a deep, narrow model (n linear
// layers of 16 with ReLU, the last one 4 classes, 4 x 4 synthetic images, replication 2,
// every variable of 64 elements or more sharded over both replicas), phased (weights and
// optimizer state remote) or standard (the optimizer state remote: the off-chip
// optimizer phase), at 2,500, 5,000 and 10,000 layers. Linear work shows as a constant
// time per layer across the three sizes (the `per_layer` counter: CPU time of the
// benchmark's thread per layer).
//
//   build/native/bench/scale_bench                    # all, a few minutes
//   build/native/bench/scale_bench --benchmark_filter=Setup
//   build/native/bench/scale_bench --write-config 10000 phased > deep.yaml   # for bench/scale.sh
//
// BM_Setup is what `poprun train` does before its first step: load and validate the
// config, build the plan, make the datasets, construct and initialise the engine, and
// start the run record; its counters split the time by stage. BM_ReadVariables reads
// every variable by name as a checkpoint does; BM_Evaluate runs the test set forward.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "config/names.h"
#include "config/yaml/load.h"
#include "engine/data/dataset.h"
#include "engine/engine.h"
#include "planner/build.h"
#include "reports/run_record.h"
#include "runner/resolved_config.h"

namespace {

using namespace popkit;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string mode_name(int mode) {
  return std::string(
      enum_name(mode == 0 ? config::ExecutionMode::kPhased : config::ExecutionMode::kStandard));
}

std::string deep_yaml(int n_layers, const std::string& mode) {
  const bool phased = parse_enum<config::ExecutionMode>(mode) == config::ExecutionMode::kPhased;
  std::string y = "version: 1\nname: deep-" + std::to_string(n_layers) + "-" + mode +
                  "\nmodel:\n  input_shape: [4, 4]\n  layers:\n";
  for (int i = 1; i < n_layers; ++i)
    y += "    - {name: fc" + std::to_string(i) + ", out_features: 16, activation: relu}\n";
  y += "    - {name: fc" + std::to_string(n_layers) + ", out_features: 4}\n";
  y += "  init: {weights: {normal: {mean: 0, std: 0.1}}, biases: zeros, seed: 7}\n";
  y += "replication:\n  factor: 2\n  groupings:\n    everyone: {group_size: 2, stride: 1}\n";
  y += "variables: {grouping: everyone}\n";
  y += "sharding: {threshold: 64, grouping: everyone, weights: true, optimizer_state: true}\n";
  y += std::string("remote: {weights: ") + (phased ? "true" : "false") +
       ", optimizer_state: true}\n";
  y += "execution: {mode: " + mode + ", phases: auto, io_mode: compute}\n";
  y += "training:\n  micro_batch_size: 8\n  gradient_accumulation: 2\n  epochs: 1\n";
  y += "  optimizer: {type: adam, lr: 1.0e-2}\n  seed: 7\n";
  y += "data: {dataset: synthetic, synthetic_train: 512, synthetic_test: 128, "
       "synthetic_noise: 0.3}\n";
  y += "device: {profile: ipu-mk2, memory_per_replica: 1GiB}\n";
  return y;
}

config::Config load(const std::string& yaml) {
  config::LoadResult r = config::load_config_string(yaml, "deep.yaml");
  if (!r.ok()) {
    std::cerr << "scale_bench: the generated config does not load\n";
    std::exit(2);
  }
  return *r.config;
}

engine::EngineOptions one_thread_per_replica() {
  engine::EngineOptions o;
  o.n_threads = 2;
  return o;
}

void per_layer(benchmark::State& state) {
  state.counters["per_layer"] = benchmark::Counter(
      static_cast<double>(state.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_LoadConfig(benchmark::State& state) {
  const std::string yaml = deep_yaml(static_cast<int>(state.range(0)), mode_name(0));
  for (auto _ : state) benchmark::DoNotOptimize(load(yaml).model.layers.size());
  per_layer(state);
}

void BM_BuildPlan(benchmark::State& state) {
  const config::Config c = load(
      deep_yaml(static_cast<int>(state.range(0)), mode_name(static_cast<int>(state.range(1)))));
  for (auto _ : state) benchmark::DoNotOptimize(planner::build_plan(c).peak_bytes);
  per_layer(state);
}

void BM_Setup(benchmark::State& state) {
  const std::string yaml =
      deep_yaml(static_cast<int>(state.range(0)), mode_name(static_cast<int>(state.range(1))));
  double config_s = 0, plan_s = 0, data_s = 0, engine_s = 0, init_s = 0, record_s = 0;
  for (auto _ : state) {
    {
      auto t = Clock::now();
      const config::Config c = load(yaml);
      config_s += seconds_since(t);
      t = Clock::now();
      const planner::Plan plan = planner::build_plan(c);
      plan_s += seconds_since(t);
      t = Clock::now();
      const engine::Dataset train = engine::load_dataset(c, engine::Split::kTrain);
      const engine::Dataset test = engine::load_dataset(c, engine::Split::kTest);
      data_s += seconds_since(t);
      t = Clock::now();
      engine::Engine engine(plan, one_thread_per_replica());
      engine_s += seconds_since(t);
      t = Clock::now();
      engine.initialize();
      init_s += seconds_since(t);
      t = Clock::now();
      reports::RunRecord record = reports::record_from_plan(plan);
      record.config = runner::resolved_config_json(c);
      benchmark::DoNotOptimize(runner::config_hash(c));
      record_s += seconds_since(t);
      state.PauseTiming();  // the teardown is not setup
    }
    state.ResumeTiming();
  }
  const auto avg = benchmark::Counter::kAvgIterations;
  state.counters["config_s"] = benchmark::Counter(config_s, avg);
  state.counters["plan_s"] = benchmark::Counter(plan_s, avg);
  state.counters["data_s"] = benchmark::Counter(data_s, avg);
  state.counters["engine_s"] = benchmark::Counter(engine_s, avg);
  state.counters["init_s"] = benchmark::Counter(init_s, avg);
  state.counters["record_s"] = benchmark::Counter(record_s, avg);
  per_layer(state);
}

// Every variable read by name as checkpoints do (runner::make_checkpoint), then written
// back as a restore does.
void BM_ReadVariables(benchmark::State& state) {
  const config::Config c = load(deep_yaml(static_cast<int>(state.range(0)), mode_name(0)));
  engine::Engine engine(planner::build_plan(c), one_thread_per_replica());
  engine.initialize();
  const std::vector<std::string> names = engine.variable_names();
  for (auto _ : state) {
    for (const std::string& name : names) {
      const auto values = engine.retrieve_variable(name);
      engine.write_variable(name, 0, values.front());
    }
  }
  per_layer(state);
}

void BM_Evaluate(benchmark::State& state) {
  const config::Config c = load(deep_yaml(static_cast<int>(state.range(0)), mode_name(0)));
  engine::Engine engine(planner::build_plan(c, planner::Program::kEval), one_thread_per_replica());
  engine.initialize();
  const engine::Dataset test = engine::load_dataset(c, engine::Split::kTest);
  for (auto _ : state) benchmark::DoNotOptimize(engine.evaluate(test).correct);
  per_layer(state);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"layers", "standard"})->Unit(benchmark::kMillisecond);
  for (int n : {2500, 5000, 10000}) b->Args({n, 0})->Args({n, 1});
}
void sizes_phased(benchmark::internal::Benchmark* b) {
  b->ArgNames({"layers"})->Unit(benchmark::kMillisecond);
  for (int n : {2500, 5000, 10000}) b->Args({n});
}

BENCHMARK(BM_LoadConfig)->Apply(sizes_phased);
BENCHMARK(BM_BuildPlan)->Apply(sizes);
BENCHMARK(BM_Setup)->Apply(sizes);
BENCHMARK(BM_ReadVariables)->Apply(sizes_phased);
BENCHMARK(BM_Evaluate)->Apply(sizes_phased);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--write-config") {
    const int n = std::atoi(argv[2]);
    const std::string mode = argv[3];
    if (n < 1 || !parse_enum<config::ExecutionMode>(mode)) {
      std::cerr << "usage: scale_bench --write-config LAYERS phased|standard\n";
      return 2;
    }
    std::cout << deep_yaml(n, mode);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
