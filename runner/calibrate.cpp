// The measurements of `poprun calibrate` and the fit of the GEMM efficiency curve.
#include "runner/calibrate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "base/output_file.h"
#include "config/yaml/profile.h"
#include "engine/data/batch_source.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/aligned_block.h"
#include "engine/runtime/collectives.h"
#include "engine/runtime/remote_store.h"
#include "engine/runtime/thread_pool.h"
#include "engine/tensor/adam.h"
#include "planner/calibrate.h"
#include "planner/workspace.h"
#include "reports/run_record.h"

namespace popkit::runner {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds per call, given `calls(n)` that makes n calls: the median of 5 batches of
// calls, each batch at least `batch_seconds` long. The median, not the minimum: a shared
// machine's steps see its noise too, and the profile should price the steps poprun will
// measure.
template <typename Calls>
double seconds_per_call(Calls&& calls, double batch_seconds) {
  calls(1);  // caches, page faults
  std::int64_t n = 1;
  for (;;) {
    const auto t0 = Clock::now();
    calls(n);
    if (since(t0) >= batch_seconds || n >= (std::int64_t{1} << 24)) break;
    n *= 2;
  }
  std::vector<double> t;
  for (int b = 0; b < 5; ++b) {
    const auto t0 = Clock::now();
    calls(n);
    t.push_back(since(t0) / static_cast<double>(n));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Seconds per call of `f` on this thread.
template <typename F>
double per_call(F&& f, double batch_seconds) {
  return seconds_per_call(
      [&](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) f();
      },
      batch_seconds);
}

// Where the measurements run: the threads replicas will run on, every one busy at once
// with its own data, as the engine keeps them (R >= threads: a replica per thread; R = 1:
// a GEMM's column blocks on every thread). Cores that share a physical core, caches or
// memory bandwidth then show what that costs a replica.
struct Machine {
  int threads = 1;
  double batch = 0.004;
  engine::ThreadPool pool;
  Machine(int n_threads, double batch_seconds)
      : threads(n_threads), batch(batch_seconds), pool(n_threads) {}

  // Seconds per call of f(states[t]) when every thread t calls it at once, one call
  // after another.
  template <typename State, typename F>
  double per_call_on_all(std::vector<State>& states, F&& f) {
    return seconds_per_call(
        [&](std::int64_t n) {
          pool.run(threads, [&](std::int64_t t) {
            for (std::int64_t i = 0; i < n; ++i) f(states[static_cast<std::size_t>(t)]);
          });
        },
        batch);
  }
};

// A float buffer, 64-byte aligned as the engine's device blocks are, filled with small
// values (no subnormals, no overflow).
struct Floats {
  explicit Floats(std::int64_t n)
      : block(static_cast<std::uint64_t>(std::max<std::int64_t>(n, 1)) * 4) {
    for (std::int64_t i = 0; i < n; ++i) data()[i] = 0.01f * static_cast<float>(i % 97 - 48);
  }
  [[nodiscard]] float* data() const { return reinterpret_cast<float*>(block.data()); }
  engine::AlignedBlock block;
};

struct Workspace {
  explicit Workspace(std::uint64_t n) : bytes(n), block(std::max<std::uint64_t>(n, 64)) {}
  [[nodiscard]] float* data() const {
    return bytes == 0 ? nullptr : reinterpret_cast<float*>(block.data());
  }
  std::uint64_t bytes;
  engine::AlignedBlock block;
};

// The layers of the MNIST plans (784 -> 512 -> 512 -> 512 -> 10) and the micro-batches
// the examples and the bench use.
constexpr std::int64_t kLayers[][2] = {{784, 512}, {512, 512}, {512, 10}};
constexpr std::int64_t kRows[] = {8, 16, 32, 64, 128, 256, 512};

// One linear layer's operands and workspaces on `rows` rows.
struct LayerData {
  LayerData(std::int64_t rows, std::int64_t in, std::int64_t out)
      : x(rows * in),
        w(in * out),
        b(out),
        y(rows * out),
        dz(rows * out),
        gw(in * out),
        gb(out),
        dx(rows * in),
        wf(planner::linear_forward_call_workspace(rows, in, 0, out)),
        wg(planner::linear_grad_call_workspace(rows, in, 0, out)),
        wd(planner::linear_dx_call_workspace(rows, out, 0, in)) {}
  Floats x, w, b, y, dz, gw, gb, dx;
  Workspace wf, wg, wd;
};

// One linear layer's three kernels on `rows` rows, timed on every thread at once, as
// GEMMs of the cost model (planner/layer_kinds.h): forward [rows, in] x [in, out]; weight
// gradient in^T dz, m = in, n = out, k = rows; input gradient dz W^T, m = rows, n = in,
// k = out.
void time_layer(Machine& machine, std::int64_t rows, std::int64_t in, std::int64_t out,
                std::vector<GemmTiming>& timings) {
  const engine::Kernels& k = engine::kernels();
  std::vector<LayerData> data;
  for (int t = 0; t < machine.threads; ++t) data.emplace_back(rows, in, out);
  const double forward = machine.per_call_on_all(data, [&](LayerData& d) {
    k.linear_act_forward_columns(config::Activation::kNone, d.x.data(), d.w.data(), d.b.data(),
                                 d.y.data(), d.y.data(), rows, in, out, 0, out, d.wf.data(),
                                 d.wf.bytes);
  });
  const double grad = machine.per_call_on_all(data, [&](LayerData& d) {
    k.linear_grad_columns(d.dz.data(), d.x.data(), d.gw.data(), d.gb.data(), rows, in, out, 0, 0,
                          out, d.wg.data(), d.wg.bytes);
  });
  const double input = machine.per_call_on_all(data, [&](LayerData& d) {
    k.linear_dx_columns(d.dz.data(), d.w.data(), d.dx.data(), rows, in, out, 0, in, d.wd.data(),
                        d.wd.bytes);
  });
  timings.push_back({"forward", rows, out, in, rows, forward, 0.0});
  timings.push_back({"weight grad", in, out, rows, rows, grad, 0.0});
  timings.push_back({"input grad", rows, in, out, rows, input, 0.0});
}

// Fits flops_per_second and half_m, half_n, half_k by least squares on log(fitted time /
// measured time), in logs, starting from the best measured rate and 16 rows per axis, to
// the GEMMs of more than planner::kSmallRows rows; those of fewer take the engine's
// small-batch kernels, priced at their FLOPs over their time. The profile's peak is
// the higher of the two rates, the other a fraction of it (efficiencies are at most 1).
double fit_gemms(std::vector<GemmTiming>& all, config::DeviceProfile& p) {
  std::vector<GemmTiming> g;
  double small_flops = 0.0, small_seconds = 0.0;
  for (const auto& t : all) {
    if (t.rows > planner::kSmallRows) {
      g.push_back(t);
    } else {
      small_flops += 2.0 * static_cast<double>(t.m * t.n * t.k);
      small_seconds += t.seconds;
    }
  }
  double best = 0.0;
  for (const auto& t : g) best = std::max(best, t.flops_per_second());
  auto apply = [&](const std::vector<double>& x) {
    p.flops_per_second = std::exp(x[0]);
    p.gemm_half_m = std::exp(x[1]);
    p.gemm_half_n = std::exp(x[2]);
    p.gemm_half_k = std::exp(x[3]);
    p.gemm_max_efficiency = 1.0;
  };
  auto loss = [&](const std::vector<double>& x) {
    apply(x);
    double sum = 0.0;
    for (const auto& t : g) {
      const double rate =
          p.flops_per_second * p.gemm_efficiency(static_cast<double>(t.m), static_cast<double>(t.n),
                                                 static_cast<double>(t.k));
      const double r = std::log(t.flops_per_second() / rate);
      sum += r * r;
    }
    return std::isfinite(sum) ? sum : HUGE_VAL;
  };
  int evaluations = 0;
  const std::vector<double> x = planner::minimise(
      loss, {std::log(best * 1.5), std::log(16.0), std::log(16.0), std::log(16.0)}, std::log(4.0),
      evaluations);
  const double sum = loss(x);
  const double curve_peak = p.flops_per_second;
  const double small_rate = small_seconds > 0 ? small_flops / small_seconds : 0.0;
  p.flops_per_second = std::max(curve_peak, small_rate);
  p.gemm_max_efficiency = curve_peak / p.flops_per_second;
  if (small_rate > 0) {
    p.gemm_small_rows = static_cast<double>(planner::kSmallRows);
    p.gemm_small_rows_efficiency = small_rate / p.flops_per_second;
  }
  for (auto& t : all)
    t.fitted_flops_per_second =
        t.rows <= planner::kSmallRows
            ? small_rate
            : p.flops_per_second * p.gemm_efficiency(static_cast<double>(t.m),
                                                     static_cast<double>(t.n),
                                                     static_cast<double>(t.k));
  return std::sqrt(sum / static_cast<double>(g.size()));
}

// Element-wise work at the FLOPs the cost model counts (planner/optimizer_kinds.cpp:
// Adam 12 per element; planner/layer_kinds.cpp: GELU's gradient 12 per element): the
// rate is their sum over their time.
constexpr std::int64_t kAdam = 1 << 18;  // fc2's weight over two replicas
constexpr std::int64_t kGelu = 128 * 512;

struct VectorData {
  VectorData() : w(kAdam), g(kAdam), m(kAdam), v(kAdam), pre(kGelu), dy(kGelu), m_half(kAdam, 0) {
    for (std::int64_t i = 0; i < kAdam; ++i) v.data()[i] = 1e-4f;
  }
  Floats w, g, m, v, pre, dy;
  std::vector<std::uint16_t> m_half;
  std::int64_t t = 1;
};

double vector_rate(Machine& machine) {
  const engine::Kernels& k = engine::kernels();
  std::vector<VectorData> data(static_cast<std::size_t>(machine.threads));
  const engine::AdamParams params;
  const double adam = machine.per_call_on_all(data, [&](VectorData& d) {
    k.adam_step(d.w.data(), d.g.data(), d.m.data(), d.v.data(), kAdam, d.t++, params);
  });
  const double adam_half = machine.per_call_on_all(data, [&](VectorData& d) {
    k.adam_step_half_m(d.w.data(), d.g.data(), d.m_half.data(), d.v.data(), kAdam, d.t++, params);
  });
  const double gelu = machine.per_call_on_all(data, [&](VectorData& d) {
    k.activation_backward(config::Activation::kGelu, d.pre.data(), d.dy.data(), kGelu);
    std::copy_n(d.g.data(), kGelu, d.dy.data());  // keep the gradient from decaying to 0
  });
  const double flops = 12.0 * (2 * kAdam + kGelu);
  return flops / (adam + adam_half + gelu);
}

struct Link {
  double bytes_per_second = 0.0;
  double latency_seconds = 0.0;
};

// Streaming memory: the engine's RemoteStore, every replica's loads and stores.
constexpr std::uint64_t kEntry = 1 << 20;

std::vector<planner::RemoteBuffer> store_buffers() {
  std::vector<planner::RemoteBuffer> buffers(2);
  buffers[0].name = "big";
  buffers[0].entry_bytes = kEntry;
  buffers[0].rows = 2;
  buffers[1].name = "small";
  buffers[1].entry_bytes = 64;
  buffers[1].rows = 2;
  return buffers;
}

struct StoreData {
  explicit StoreData(const std::vector<planner::RemoteBuffer>& buffers)
      : store(buffers), tensor(kEntry / 4) {}
  engine::RemoteStore store;
  Floats tensor;
  [[nodiscard]] std::byte* bytes() const { return reinterpret_cast<std::byte*>(tensor.data()); }
};

Link streaming(Machine& machine) {
  const auto buffers = store_buffers();  // the stores keep a pointer to them
  std::vector<StoreData> data;
  for (int t = 0; t < machine.threads; ++t) data.emplace_back(buffers);
  const double big = machine.per_call_on_all(data, [&](StoreData& d) {
    d.store.load(0, 0, d.bytes(), kEntry);
    d.store.store(0, 1, d.bytes(), kEntry);
  });
  const double small = machine.per_call_on_all(data, [&](StoreData& d) {
    d.store.load(1, 0, d.bytes(), 64);
    d.store.store(1, 1, d.bytes(), 64);
  });
  return {2.0 * kEntry / std::max(1e-12, big - small), small / 2};
}

// Host streams: a host_load of images normalises a micro-batch's pixels into float32;
// the cost model counts the float bytes.
constexpr std::size_t kPixels = 256 * 784;

struct PixelData {
  PixelData() : pixels(kPixels), x(kPixels) {
    for (std::size_t i = 0; i < kPixels; ++i) pixels[i] = static_cast<std::uint8_t>(i * 7);
  }
  std::vector<std::uint8_t> pixels;
  Floats x;
};

Link host(Machine& machine) {
  std::vector<PixelData> data(static_cast<std::size_t>(machine.threads));
  const double big = machine.per_call_on_all(data, [&](PixelData& d) {
    engine::normalize_pixels(d.pixels.data(), kPixels, 0.13, 0.31, d.x.data());
  });
  const double small = machine.per_call_on_all(data, [&](PixelData& d) {
    engine::normalize_pixels(d.pixels.data(), 8, 0.13, 0.31, d.x.data());
  });
  return {4.0 * kPixels / std::max(1e-12, big - small), small};
}

// Collectives over R = max(2, threads) replicas on the engine's thread pool, as a step
// runs them: the collective, then the next segment's run of the replicas on the pool.
// The latency is per synchronised exchange, as the cost model prices it (an all-reduce
// is two, an all-gather one): fitted by least squares to a tiny all-reduce (2 L) and a
// tiny all-gather (L). The bandwidth is what a 1 MiB all-reduce adds, at the bytes the
// cost model counts for it, 4 (G-1) / G of the tensor per replica, sent and received
// overlapping (halved).
Link collectives(Machine& machine) {
  const std::int64_t r = std::max(2, machine.threads);
  const double batch = machine.batch;
  engine::ThreadPool& pool = machine.pool;
  auto coll = engine::make_in_process_collectives(r, &pool);
  const planner::ReplicaGrouping all{r, r, 1};
  constexpr std::int64_t kBig = 1 << 18;
  std::vector<Floats> big, tiny, shard;
  for (std::int64_t i = 0; i < r; ++i) {
    big.emplace_back(kBig);
    tiny.emplace_back(16 * r);
    shard.emplace_back(16);
  }
  auto buffers = [&](std::vector<Floats>& f, std::int64_t n) {
    std::vector<engine::ReplicaBuffer> out;
    for (std::int64_t i = 0; i < r; ++i)
      out.push_back({i, reinterpret_cast<std::byte*>(f[static_cast<std::size_t>(i)].data()), n,
                     planner::DType::kFloat32});
    return out;
  };
  const auto big_b = buffers(big, kBig), tiny_b = buffers(tiny, 16 * r),
             shard_b = buffers(shard, 16);
  // A segment's run of the pool: each task a token of work (atomic: the tasks run at once).
  std::atomic<std::int64_t> sink{0};
  auto segment = [&] {
    pool.run(r, [&](std::int64_t i) { sink.fetch_add(i, std::memory_order_relaxed); });
  };
  const double reduce_tiny = per_call(
      [&] {
        coll->all_reduce(all, planner::ReduceOp::kMean, tiny_b);
        segment();
      },
      batch);
  const double gather_tiny = per_call(
      [&] {
        coll->all_gather(all, shard_b, tiny_b);
        segment();
      },
      batch);
  const double reduce_big = per_call(
      [&] {
        coll->all_reduce(all, planner::ReduceOp::kMean, big_b);
        segment();
      },
      batch);
  const double latency = (2 * reduce_tiny + gather_tiny) / 5;
  const double g = static_cast<double>(r);
  const double bytes_per_replica = 4.0 * (g - 1) / g * kBig * 4;
  return {bytes_per_replica / 2 / std::max(1e-12, reduce_big - reduce_tiny), latency};
}

// A run of the thread pool as the engine meets it between segments and spread GEMMs:
// its threads asleep, having spun past their wait (engine/runtime/thread_pool.cpp spins
// 50 us) while the caller computed, then woken and waited for.
double barrier(Machine& machine) {
  std::vector<double> t;
  for (int i = 0; i < 100; ++i) {
    const auto idle = Clock::now();
    while (since(idle) < 200e-6) {
    }  // the caller computes while the pool's threads fall asleep
    const auto t0 = Clock::now();
    machine.pool.run(machine.threads, [](std::int64_t) {});
    t.push_back(since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// What a compute op costs beyond its work: the smallest kernel call and the two clock
// reads the engine times each op with.
double op_overhead(Machine& machine) {
  const double batch = machine.batch;
  const engine::Kernels& k = engine::kernels();
  Floats x(8), w(8), b(8), y(8);
  Workspace ws(planner::linear_forward_call_workspace(1, 1, 0, 1));
  return per_call(
      [&] {
        const auto t0 = Clock::now();
        k.linear_act_forward_columns(config::Activation::kNone, x.data(), w.data(), b.data(),
                                     y.data(), y.data(), 1, 1, 1, 0, 1, ws.data(), ws.bytes);
        static_cast<void>(since(t0));
      },
      batch);
}

constexpr int kRounds = 3;

// The median of f(0), ..., f(kRounds - 1).
template <typename F>
double median_of(F&& f) {
  std::vector<double> v;
  for (int r = 0; r < kRounds; ++r) v.push_back(f(r));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string si(double v, const char* unit) {
  if (v >= 1e9) return fmt::format("{:.2f} G{}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.2f} M{}", v / 1e6, unit);
  return fmt::format("{:.3g} {}", v, unit);
}

}  // namespace

MachineCalibration calibrate_machine(const CalibrateOptions& options) {
  const auto t0 = Clock::now();
  MachineCalibration c;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = options.n_threads > 0 ? options.n_threads : cores;
  c.cpu = reports::current_environment(threads).cpu_model;
  c.kernels = engine::kernels_in_use();
  config::DeviceProfile& p = c.profile;
  p.name = options.name;
  p.description = fmt::format("{}, {} threads, measured by poprun calibrate", c.cpu, threads);
  p.tiles = 1;  // no IO tiles on a CPU: io_tiles take nothing from compute
  // The machine's memory, whole MiB: a CPU's replicas share it (device.memory_per_replica
  // sets a replica's share).
  const auto pages = static_cast<std::uint64_t>(std::max(0L, sysconf(_SC_PHYS_PAGES)));
  const auto page = static_cast<std::uint64_t>(std::max(0L, sysconf(_SC_PAGESIZE)));
  p.memory_bytes = std::max<std::uint64_t>(1, pages * page >> 20) << 20;
  p.host_threads = threads;
  Machine machine(threads, options.seconds_per_batch);

  // Each figure is the median of kRounds rounds, the GEMM sweep's rounds one after
  // another: on a shared machine, a burst of someone else's work then spoils one round
  // of a shape, not the shape.
  std::vector<std::vector<GemmTiming>> rounds(kRounds);
  for (auto& round : rounds)
    for (const auto& [in, out] : kLayers)
      for (const std::int64_t rows : kRows) time_layer(machine, rows, in, out, round);
  c.gemms = rounds.front();
  for (std::size_t i = 0; i < c.gemms.size(); ++i)
    c.gemms[i].seconds =
        median_of([&](int r) { return rounds[static_cast<std::size_t>(r)][i].seconds; });
  c.gemm_fit_rms = fit_gemms(c.gemms, p);

  p.vector_flops_per_second = median_of([&](int) { return vector_rate(machine); });
  const auto link = [&](Link (*measure)(Machine&)) {
    std::vector<Link> l;
    for (int r = 0; r < kRounds; ++r) l.push_back(measure(machine));
    const double bandwidth =
        median_of([&](int r) { return l[static_cast<std::size_t>(r)].bytes_per_second; });
    const double latency =
        median_of([&](int r) { return l[static_cast<std::size_t>(r)].latency_seconds; });
    return config::LinkProfile{bandwidth, latency, 1.0, 1.0};
  };
  p.streaming = link(streaming);
  p.host = link(host);
  p.ipu_link = link(collectives);
  p.op_overhead_seconds = median_of([&](int) { return op_overhead(machine); });
  p.barrier_seconds = median_of([&](int) { return barrier(machine); });
  // Host and remote transfers are copies on the replica's own thread: nothing
  // synchronises beyond what the links' latencies measured.
  p.sync_overhead_seconds = 0.0;

  c.measured = {
      {"element-wise (Adam, GELU gradient)", p.vector_flops_per_second, "FLOP/s"},
      {"streaming copy (RemoteStore, 1 MiB)", p.streaming.bytes_per_second, "B/s"},
      {"host stream (pixel normalisation)", p.host.bytes_per_second, "B/s"},
      {"collective bandwidth (all-reduce, 1 MiB)", p.ipu_link.bytes_per_second, "B/s"},
      {"collective latency (per exchange)", p.ipu_link.latency_seconds * 1e6, "µs"},
      {"compute op overhead", p.op_overhead_seconds * 1e6, "µs"},
      {"thread pool barrier (threads asleep)", p.barrier_seconds * 1e6, "µs"},
  };
  c.seconds = since(t0);
  return c;
}

std::string calibrated_profile_yaml(const MachineCalibration& c) {
  return config::profile_to_yaml(
      c.profile,
      {fmt::format("A CPU profile measured by `poprun calibrate` on {}, kernels {}.", c.cpu,
                   c.kernels),
       "The GEMM rate and curve are fitted to the linear kernels at the MNIST plans' shapes;",
       "the other figures are the engine's own copies, collectives and element-wise kernels",
       "(runner/calibrate.h). Estimates from it compare with poprun's measurements on this",
       "machine; on another, calibrate again."});
}

void print_machine_calibration(std::ostream& out, const MachineCalibration& c) {
  fmt::print(out, "CPU: {}\nkernels: {}\nthreads: {}\n\n", c.cpu, c.kernels,
             c.profile.host_threads);
  fmt::print(out, "GEMMs (the linear kernels, every thread its own at once)\n");
  fmt::print(out, "{:<12} {:>5} {:>5} {:>5} {:>15} {:>15}\n", "kernel", "m", "n", "k", "measured",
             "fitted");
  for (const auto& g : c.gemms)
    fmt::print(out, "{:<12} {:>5} {:>5} {:>5} {:>15} {:>15}\n", g.kernel, g.m, g.n, g.k,
               si(g.flops_per_second(), "FLOP/s"), si(g.fitted_flops_per_second, "FLOP/s"));
  fmt::print(out,
             "fit: peak {}, half_m {:.1f}, half_n {:.1f}, half_k {:.1f}; rms log error {:.3f}; "
             "up to {} rows {}\n\n",
             si(c.profile.flops_per_second * c.profile.gemm_max_efficiency, "FLOP/s"),
             c.profile.gemm_half_m, c.profile.gemm_half_n, c.profile.gemm_half_k, c.gemm_fit_rms,
             c.profile.gemm_small_rows,
             si(c.profile.flops_per_second * c.profile.gemm_small_rows_efficiency, "FLOP/s"));
  for (const auto& m : c.measured)
    fmt::print(out, "{:<42} {}\n", m.what,
               m.unit == "µs" ? fmt::format("{:.2f} µs", m.value) : si(m.value, m.unit.c_str()));
  fmt::print(out, "calibration took {:.1f} s\n", c.seconds);
}

int run_calibrate_command(const CalibrateCommand& command, std::ostream& out, std::ostream& err) {
  namespace fs = std::filesystem;
  // A path that cannot be written is refused before the measurements, not after.
  const fs::path path(command.output);
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::error_code ec;
  if (command.output.empty() || fs::is_directory(path, ec)) {
    err << "poprun calibrate: error: --output '" << command.output
        << "' is not a file name; give the profile file to write, e.g. -o my-cpu.yaml\n";
    return 2;
  }
  if (!fs::is_directory(folder, ec)) {
    err << "poprun calibrate: error: --output '" << command.output << "': the folder '"
        << folder.string() << "' does not exist\n";
    return 2;
  }
  const MachineCalibration c = calibrate_machine(command.options);
  const std::string yaml = calibrated_profile_yaml(c);
  // What is written must load as a profile (config/yaml/profile.h): checked, not assumed.
  const config::ProfileLoad back =
      config::load_profile_string(yaml, command.output, c.profile.name);
  if (!back.ok()) throw Error("poprun calibrate wrote a profile that does not load (a bug)");
  AtomicFile file(command.output, TemporaryName::kSuffix);
  file.write(yaml.data(), yaml.size());
  file.commit();
  print_machine_calibration(out, c);
  out << fmt::format(
      "wrote {} (device profile {}); plan with it: --set device.profile={}\n", command.output,
      c.profile.name,
      config::is_profile_path(command.output) ? command.output : "./" + command.output);
  return 0;
}

}  // namespace popkit::runner
