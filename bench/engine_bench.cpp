// Microbenchmarks of the engine's hot pieces and of whole optimizer steps, and the
// machine's sgemm rate that bounds them. Throughput figures are counters
// (samples/s, FLOP/s); compare rows of one run, never across machines.
//
//   build/perf/bench/engine_bench --benchmark_filter='Sgemm|TrainStep'
//
// The GEMM-bound fraction of a training configuration is
//   flops_per_sample x samples/s / (the machine's sgemm rate, all cores)
// where flops_per_sample counts forward (2 in out per layer), backward (2 in out for
// the weight gradient, 2 in out for the input gradient except the first layer) and the
// optimizer (kAdamFlops per parameter, per global batch). BM_TrainStep reports it as
// `gemm_bound` once BM_SgemmMachine has run in the same process (it runs first).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "config/yaml/load.h"
#include "engine/data/batch_source.h"
#include "engine/data/dataset.h"
#include "engine/engine.h"
#include "engine/kernels/adam.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/linear.h"
#include "engine/runtime/collectives.h"
#include "engine/runtime/remote_store.h"
#include "engine/tensor/adam.h"
#include "engine/tensor/init.h"
#include "engine/tensor/layers.h"
#include "planner/build.h"
#include "planner/workspace.h"

namespace {

using namespace popkit;
using RowMatrixF = engine::RowMatrix<float>;

// Adam per element: two moment updates (3 + 4), sqrt, add, divide, fma: about 12.
constexpr double kAdamFlops = 12.0;

std::vector<float> random_vector(std::int64_t n, std::uint64_t key) {
  std::vector<float> v(static_cast<std::size_t>(n));
  engine::fill_normal(v.data(), n, 0.0, 1.0, key);
  return v;
}

// ---- the machine's limit -------------------------------------------------------------

double g_machine_sgemm_flops = 0.0;  // set by BM_SgemmMachine

// One thread, Eigen's GEMM on row-major n x n matrices, inlined at this file's level (the
// baseline's in a portable build; BM_SgemmMachine calls the level in use).
void BM_Sgemm(benchmark::State& state) {
  const auto n = static_cast<Eigen::Index>(state.range(0));
  const RowMatrixF a = RowMatrixF::Random(n, n), b = RowMatrixF::Random(n, n);
  RowMatrixF c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n),
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sgemm)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);

// A kernel call's workspace, as the engine gives it: 64-byte aligned, of the planned size.
struct Workspace {
  explicit Workspace(std::uint64_t n) : bytes(n), floats(n / sizeof(float) + 16) {}
  float* data() {
    auto p = reinterpret_cast<std::uintptr_t>(floats.data());
    return bytes == 0 ? nullptr : reinterpret_cast<float*>((p + 63) / 64 * 64);
  }
  std::uint64_t bytes;
  std::vector<float> floats;
};

// Every core at once, each its own single-threaded n x n x n GEMM through the engine's
// linear kernel at the level in use (as replicas run; Eigen inlined here would be this
// file's own level, the baseline's in a portable build): the rate of the whole machine,
// the bound of a training step.
class MachineGemm {
 public:
  explicit MachineGemm(std::int64_t n)
      : n_(n), cores_(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
    for (int i = 0; i < cores_; ++i) {
      a_.push_back(random_vector(n * n, 10 + static_cast<std::uint64_t>(i)));
      b_.push_back(random_vector(n * n, 100 + static_cast<std::uint64_t>(i)));
      c_.emplace_back(static_cast<std::size_t>(n * n));
      ws_.emplace_back(planner::linear_forward_call_workspace(n, n, 0, n));
    }
    bias_.assign(static_cast<std::size_t>(n), 0.0f);
  }
  void run() {
    std::vector<std::thread> threads;
    for (int i = 1; i < cores_; ++i) threads.emplace_back([this, i] { gemm(i); });
    gemm(0);
    for (auto& t : threads) t.join();
  }
  [[nodiscard]] double flops() const { return 2.0 * double(n_) * double(n_) * double(n_) * cores_; }
  [[nodiscard]] int cores() const { return cores_; }

 private:
  void gemm(int i) {
    const auto k = static_cast<std::size_t>(i);
    engine::kernels_of<engine::LinearKernels>().forward_columns(
        config::Activation::kNone, a_[k].data(), b_[k].data(), bias_.data(), c_[k].data(),
        c_[k].data(), n_, n_, n_, 0, n_, ws_[k].data(), ws_[k].bytes);
  }
  std::int64_t n_;
  int cores_;
  std::vector<std::vector<float>> a_, b_, c_;
  std::vector<Workspace> ws_;
  std::vector<float> bias_;
};

void BM_SgemmMachine(benchmark::State& state) {
  MachineGemm gemm(state.range(0));
  for (auto _ : state) gemm.run();
  state.counters["FLOP/s"] =
      benchmark::Counter(gemm.flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["cores"] = gemm.cores();
}
BENCHMARK(BM_SgemmMachine)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// Measures the machine rate once, outside Google Benchmark's timing, for gemm_bound.
double machine_sgemm_flops() {
  if (g_machine_sgemm_flops > 0.0) return g_machine_sgemm_flops;
  MachineGemm gemm(1024);
  gemm.run();
  std::vector<double> rates;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm.run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(gemm.flops() / s);
  }
  std::sort(rates.begin(), rates.end());
  g_machine_sgemm_flops = rates[rates.size() / 2];
  return g_machine_sgemm_flops;
}

// ---- layers --------------------------------------------------------------------------

// A 512 -> 512 GELU layer (fc2, fc3), forward: pre = x W + b, out = gelu(pre).
void BM_LayerForward(benchmark::State& state) {
  const std::int64_t n = state.range(0), in = state.range(1), out = 512;
  const auto x = random_vector(n * in, 1), w = random_vector(in * out, 2),
             b = random_vector(out, 3);
  std::vector<float> pre(static_cast<std::size_t>(n * out)), y(pre.size());
  Workspace ws(planner::linear_forward_call_workspace(n, in, 0, out));
  for (auto _ : state) {
    engine::kernels_of<engine::LinearKernels>().forward_columns(
        config::Activation::kGelu, x.data(), w.data(), b.data(), pre.data(), y.data(), n, in, out,
        0, out, ws.data(), ws.bytes);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * double(n * in * out), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_LayerForward)
    ->ArgsProduct({{8, 32, 128}, {512, 784}})
    ->ArgNames({"mb", "in"})
    ->Unit(benchmark::kMicrosecond);

// Backward of the same layer as the engine's kBackward runs it: dz = dy gelu'(pre),
// dx = dz W^T, then dW and db accumulated as a running mean (step s of 4).
void BM_LayerBackward(benchmark::State& state) {
  const std::int64_t n = state.range(0), in = state.range(1), out = 512;
  const auto x = random_vector(n * in, 1), w = random_vector(in * out, 2);
  const auto pre = random_vector(n * out, 3), dy0 = random_vector(n * out, 4);
  std::vector<float> dy(dy0), dx(static_cast<std::size_t>(n * in));
  std::vector<float> gw(static_cast<std::size_t>(in * out)), gb(static_cast<std::size_t>(out));
  std::int64_t s = 0;
  Workspace ws_dx(planner::linear_dx_call_workspace(n, out, 0, in));
  Workspace ws_grad(planner::linear_grad_call_workspace(n, in, 0, out));
  for (auto _ : state) {
    std::copy(dy0.begin(), dy0.end(), dy.begin());
    engine::kernels_of<engine::LinearKernels>().activation_backward(config::Activation::kGelu,
                                                                    pre.data(), dy.data(), n * out);
    engine::kernels_of<engine::LinearKernels>().dx_columns(dy.data(), w.data(), dx.data(), n, in,
                                                           out, 0, in, ws_dx.data(), ws_dx.bytes);
    engine::kernels_of<engine::LinearKernels>().grad_columns(dy.data(), x.data(), gw.data(),
                                                             gb.data(), n, in, out, s % 4, 0, out,
                                                             ws_grad.data(), ws_grad.bytes);
    ++s;
    benchmark::DoNotOptimize(gw.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(4.0 * double(n * in * out), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_LayerBackward)
    ->ArgsProduct({{8, 32, 128}, {512, 784}})
    ->ArgNames({"mb", "in"})
    ->Unit(benchmark::kMicrosecond);

// ---- collectives, remote store, Adam -------------------------------------------------

// fc1.weight's gradient (784 x 512) over R replicas in one group: all-reduce,
// reduce-scatter to shards, all-gather back.
struct CollectiveFixture {
  std::int64_t r, n, shard;
  std::vector<std::vector<float>> full, shards;
  std::vector<engine::ReplicaBuffer> full_bufs, shard_bufs;
  std::unique_ptr<engine::Collectives> coll;
  planner::ReplicaGrouping everyone;

  explicit CollectiveFixture(std::int64_t replicas)
      : r(replicas), n(784 * 512), shard((n + replicas - 1) / replicas) {
    everyone = planner::ReplicaGrouping{r, r, 1};
    coll = engine::make_in_process_collectives(r);
    for (std::int64_t i = 0; i < r; ++i) {
      full.push_back(random_vector(n, 10 + static_cast<std::uint64_t>(i)));
      shards.emplace_back(static_cast<std::size_t>(shard));
    }
    for (std::int64_t i = 0; i < r; ++i) {
      full_bufs.push_back({i, reinterpret_cast<std::byte*>(full[i].data()), n});
      shard_bufs.push_back({i, reinterpret_cast<std::byte*>(shards[i].data()), shard});
    }
  }
};

void BM_AllReduce(benchmark::State& state) {
  CollectiveFixture f(state.range(0));
  for (auto _ : state) f.coll->all_reduce(f.everyone, planner::ReduceOp::kMean, f.full_bufs);
  state.SetBytesProcessed(state.iterations() * f.n * 4 * f.r);
}
BENCHMARK(BM_AllReduce)->Arg(2)->Arg(4)->Unit(benchmark::kMicrosecond);

void BM_ReduceScatter(benchmark::State& state) {
  CollectiveFixture f(state.range(0));
  for (auto _ : state)
    f.coll->reduce_scatter(f.everyone, f.everyone, planner::ReduceOp::kMean, f.full_bufs,
                           f.shard_bufs);
  state.SetBytesProcessed(state.iterations() * f.n * 4 * f.r);
}
BENCHMARK(BM_ReduceScatter)->Arg(2)->Arg(4)->Unit(benchmark::kMicrosecond);

void BM_AllGather(benchmark::State& state) {
  CollectiveFixture f(state.range(0));
  for (auto _ : state) f.coll->all_gather(f.everyone, f.shard_bufs, f.full_bufs);
  state.SetBytesProcessed(state.iterations() * f.n * 4 * f.r);
}
BENCHMARK(BM_AllGather)->Arg(2)->Arg(4)->Unit(benchmark::kMicrosecond);

// A remote buffer of 8 entries of a sharded fc1.weight (784 x 512 / 2 floats).
void BM_RemoteLoadStore(benchmark::State& state) {
  planner::RemoteBuffer b;
  b.name = "fc1.weight";
  b.element_shape = {784 * 256};
  b.rows = 8;
  b.entry_bytes = 784 * 256 * 4;
  const std::vector<planner::RemoteBuffer> buffers{b};
  engine::RemoteStore store(buffers);
  std::vector<std::byte> device(b.entry_bytes);
  std::int64_t e = 0;
  for (auto _ : state) {
    store.load(0, e % 8, device.data(), b.entry_bytes);
    store.store(0, (e + 3) % 8, device.data(), b.entry_bytes);
    ++e;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * b.entry_bytes));
}
BENCHMARK(BM_RemoteLoadStore)->Unit(benchmark::kMicrosecond);

// Adam on one shard of fc1.weight (half of 784 x 512), float32 or float16 first moment.
void BM_AdamShard(benchmark::State& state) {
  const std::int64_t n = 784 * 512 / 2;
  auto w = random_vector(n, 1);
  const auto g = random_vector(n, 2);
  std::vector<float> m(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
  std::vector<Eigen::half> mh(static_cast<std::size_t>(n), Eigen::half(0.0f));
  const auto p = engine::AdamParams::from(config::Optimizer{});
  std::int64_t t = 1;
  for (auto _ : state) {
    if (state.range(0) == 16)
      engine::kernels_of<engine::AdamKernels>().step_half_m(w.data(), g.data(), mh.data(), v.data(),
                                                            n, t++, p);
    else
      engine::kernels_of<engine::AdamKernels>().step(w.data(), g.data(), m.data(), v.data(), n, t++,
                                                     p);
    benchmark::DoNotOptimize(w.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AdamShard)
    ->Arg(32)
    ->Arg(16)
    ->ArgName("first_order_bits")
    ->Unit(benchmark::kMicrosecond);

// ---- whole optimizer steps -----------------------------------------------------------

// The configurations, from examples/mnist.yaml with --set overrides.
const std::vector<std::pair<std::string, std::vector<std::string>>>& configurations() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> c = {
      {"a_phased", {}},
      {"a_phased_overlapped", {"execution.io_mode=io_overlapped"}},
      {"b_standard",
       {"execution.mode=standard", "remote.weights=false", "remote.optimizer_state=false"}},
      {"c_r2_mb128",
       {"execution.mode=standard", "remote.weights=false", "remote.optimizer_state=false",
        "training.micro_batch_size=128", "training.gradient_accumulation=1"}},
      {"d_r1_b256",
       {"execution.mode=standard", "remote.weights=false", "remote.optimizer_state=false",
        "replication.factor=1", "replication.groupings.everyone.group_size=1",
        "training.micro_batch_size=256", "training.gradient_accumulation=1"}},
  };
  return c;
}

double flops_per_sample(const planner::Plan& plan) {
  double fwd = 0, bwd = 0, params = 0;
  for (std::size_t l = 0; l < plan.layers.size(); ++l) {
    const auto& layer = plan.layers[l];
    const double io = double(layer.in_features) * double(layer.out_features);
    fwd += 2 * io;
    bwd += (l == 0 ? 2 : 4) * io;
    params += io + double(layer.out_features);
  }
  return fwd + bwd + kAdamFlops * params / double(plan.global_batch_size);
}

void BM_TrainStep(benchmark::State& state) {
  const auto& [name, overrides] = configurations()[static_cast<std::size_t>(state.range(0))];
  state.SetLabel(name);
  std::vector<std::string> sets = overrides;
  sets.push_back("data.dataset=synthetic");
  const auto loaded = config::load_config_file(POPKIT_SOURCE_DIR "/examples/mnist.yaml", sets);
  if (!loaded.ok()) {
    state.SkipWithError("examples/mnist.yaml does not load with the overrides");
    return;
  }
  const config::Config& cfg = *loaded.config;
  const planner::Plan plan = planner::build_plan(cfg);
  const double rate = machine_sgemm_flops();
  engine::Engine engine(plan);
  engine.initialize();
  const engine::Dataset data = engine::make_synthetic(4096, 28, 28, 42, 0.5);
  engine::DatasetBatches batches(data, plan.replication_factor, plan.gradient_accumulation,
                                 plan.micro_batch_size);
  std::vector<std::int64_t> order(static_cast<std::size_t>(data.n));
  std::iota(order.begin(), order.end(), 0);
  const std::int64_t n_batches = data.n / plan.global_batch_size;
  std::int64_t step = 0;
  for (int warm = 0; warm < 3; ++warm) {
    batches.set_batch(order, step++ % n_batches);
    engine.train_step(batches);
  }
  for (auto _ : state) {
    batches.set_batch(order, step++ % n_batches);
    benchmark::DoNotOptimize(engine.train_step(batches));
  }
  const double fps = flops_per_sample(plan);
  state.SetItemsProcessed(state.iterations() * plan.global_batch_size);
  state.counters["samples/s"] = benchmark::Counter(double(plan.global_batch_size),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.counters["FLOP/sample"] = fps;
  state.counters["machine_FLOP/s"] = rate;
  // gemm_bound = FLOP/sample x samples/s / machine rate: a rate counter over the step
  // time, normalised by the constant rate.
  state.counters["gemm_bound"] = benchmark::Counter(fps * double(plan.global_batch_size) / rate,
                                                    benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = engine.n_threads();
}
BENCHMARK(BM_TrainStep)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
