// The measurements of `poprun calibrate` and the fit of the GEMM efficiency curve.
#include "runner/calibrate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>
#include <utility>

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
#include "runner/placement.h"

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
      : bytes(static_cast<std::uint64_t>(std::max<std::int64_t>(n, 1)) * 4), block(bytes) {
    for (std::int64_t i = 0; i < n; ++i) data()[i] = 0.01f * static_cast<float>(i % 97 - 48);
  }
  [[nodiscard]] float* data() const { return reinterpret_cast<float*>(block.data()); }
  std::uint64_t bytes;
  engine::AlignedBlock block;
};

struct Workspace {
  explicit Workspace(std::uint64_t n) : bytes(n), block(std::max<std::uint64_t>(n, 64)) {}
  explicit Workspace(const planner::OpWorkspace& w) : Workspace(w.bytes()) {
    region_bytes = w.region_bytes;
  }
  [[nodiscard]] float* data() const {
    return bytes == 0 ? nullptr : reinterpret_cast<float*>(block.data());
  }
  // The region of the column block that starts at column j0 (engine/layer_kinds.cpp).
  [[nodiscard]] float* of(std::int64_t j0) const {
    if (bytes == 0) return nullptr;
    return data() + static_cast<std::uint64_t>(j0 / planner::kColumnBlock) * region_bytes / 4;
  }
  std::uint64_t bytes;
  std::uint64_t region_bytes = 0;
  engine::AlignedBlock block;
};

// The layers of the MNIST plans (784 -> 512 -> 512 -> 512 -> 10) and the micro-batches
// the examples and the bench use.
constexpr std::int64_t kLayers[][2] = {{784, 512}, {512, 512}, {512, 10}};
// Their two large layers: where a few microseconds of folding or spreading show beside
// the GEMM's time (512 -> 10 is all fixed cost).
constexpr std::int64_t kLargeLayers[][2] = {{784, 512}, {512, 512}};
constexpr std::int64_t kRows[] = {8, 16, 32, 64, 128, 256, 512};

// One linear layer's operands and workspaces on `rows` rows, and its three kernels
// called as the engine calls them (engine/layer_kinds.cpp): over the output columns in
// planner::column_blocks, one after another, each block packing into its own region.
struct LayerData {
  LayerData(std::int64_t rows_, std::int64_t in_, std::int64_t out_)
      : rows(rows_),
        in(in_),
        out(out_),
        x(rows * in),
        w(in * out),
        b(out),
        y(rows * out),
        dz(rows * out),
        gw(in * out),
        gb(out),
        dx(rows * in),
        wf(planner::linear_forward_workspace(rows, in, out)),
        wb(planner::linear_backward_workspace(rows, in, out, true)) {}

  // Each kernel runs its column blocks one after another, or with `pool` spread over its
  // threads as the engine spreads a lone replica's (engine/engine.cpp in_column_blocks).
  void forward(const engine::Kernels& k, engine::ThreadPool* pool = nullptr) const {
    in_blocks(pool, rows * in, out, [&](std::int64_t j0, std::int64_t j1) {
      k.linear_act_forward_columns(config::Activation::kNone, x.data(), w.data(), b.data(),
                                   y.data(), y.data(), rows, in, out, j0, j1, wf.of(j0),
                                   wf.region_bytes);
    });
  }
  // At micro-batch `step` of an accumulation: after the first, the kernels fold the
  // gradient into the accumulators' running mean.
  void weight_grad(const engine::Kernels& k, std::int64_t step = 0,
                   engine::ThreadPool* pool = nullptr) const {
    in_blocks(pool, rows * in, out, [&](std::int64_t j0, std::int64_t j1) {
      k.linear_grad_columns(dz.data(), x.data(), gw.data(), gb.data(), rows, in, out, step, j0, j1,
                            wb.of(j0), wb.region_bytes);
    });
  }
  void input_grad(const engine::Kernels& k, engine::ThreadPool* pool = nullptr) const {
    in_blocks(pool, rows * out, in, [&](std::int64_t i0, std::int64_t i1) {
      k.linear_dx_columns(dz.data(), w.data(), dx.data(), rows, in, out, i0, i1, wb.of(i0),
                          wb.region_bytes);
    });
  }
  [[nodiscard]] std::uint64_t bytes() const {
    std::uint64_t n = wf.bytes + wb.bytes;
    for (const Floats* f : {&x, &w, &b, &y, &dz, &gw, &gb, &dx}) n += f->bytes;
    return n;
  }

  std::int64_t rows, in, out;
  Floats x, w, b, y, dz, gw, gb, dx;
  Workspace wf, wb;

 private:
  template <typename Fn>
  static void in_blocks(engine::ThreadPool* pool, std::int64_t rows_x_inner, std::int64_t n_cols,
                        Fn&& fn) {
    const planner::ColumnBlocks cb = planner::column_blocks(rows_x_inner, n_cols);
    const auto block = [&](std::int64_t j) {
      fn(j * cb.width, cb.n == 1 ? n_cols : std::min(n_cols, (j + 1) * cb.width));
    };
    if (pool != nullptr && cb.n > 1) {
      pool->run(cb.n, block);
      return;
    }
    for (std::int64_t j = 0; j < cb.n; ++j) block(j);
  }
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
  const double forward = machine.per_call_on_all(data, [&](LayerData& d) { d.forward(k); });
  const double grad = machine.per_call_on_all(data, [&](LayerData& d) { d.weight_grad(k); });
  const double input = machine.per_call_on_all(data, [&](LayerData& d) { d.input_grad(k); });
  timings.push_back({"forward", rows, out, in, rows, forward, 0.0});
  timings.push_back({"weight grad", in, out, rows, rows, grad, 0.0});
  timings.push_back({"input grad", rows, in, out, rows, input, 0.0});
}

// A lone replica's GEMMs spread over the threads (config/device_profile.h
// gemm_spread_efficiency): one layer's three kernels with their column blocks on the pool,
// as the engine runs them for R = 1, against their price from the kernels timed on every
// thread at once (`gemms`): each kernel's share of its blocks (the slowest thread's,
// planner's column_share) and a run of the pool with its threads spinning. The priced
// time over the measured, summed over the MNIST plans' two large layers at 8-256 rows.
double spread_efficiency(Machine& machine, const std::vector<GemmTiming>& gemms,
                         double pool_run_seconds) {
  const engine::Kernels& k = engine::kernels();
  double priced = 0.0, measured = 0.0;
  for (const auto& [in, out] : kLargeLayers)
    for (const std::int64_t rows : {8, 16, 32, 64, 128, 256}) {
      const LayerData d(rows, in, out);
      measured += per_call(
          [&] {
            d.forward(k, &machine.pool);
            d.weight_grad(k, 0, &machine.pool);
            d.input_grad(k, &machine.pool);
          },
          machine.batch);
      for (const GemmTiming& g : gemms) {
        const bool forward = g.kernel == "forward" && g.m == rows && g.n == out && g.k == in;
        const bool grad = g.kernel == "weight grad" && g.m == in && g.n == out && g.k == rows;
        const bool input = g.kernel == "input grad" && g.m == rows && g.n == in && g.k == out;
        if (!forward && !grad && !input) continue;
        const planner::ColumnBlocks cb = planner::column_blocks(g.m * g.k, g.n);
        priced += cb.n == 1 ? g.seconds
                            : g.seconds * cb.busiest_share(machine.threads) + pool_run_seconds;
      }
    }
  return priced / measured;
}

// The running mean of the gradient accumulators (config/device_profile.h
// accumulate_seconds): the weight gradient at a micro-batch after the first against the
// first's, timed one after the other on every thread at once, on the MNIST plans' two
// large layers at the micro-batches where it is not lost in the GEMM's time; what the
// later ones add, summed, per weight summed. Up to 64 rows: beyond, a few microseconds
// are noise beside a GEMM of a millisecond.
double accumulate_seconds(Machine& machine) {
  const engine::Kernels& k = engine::kernels();
  double extra = 0.0, weights = 0.0;
  for (const auto& [in, out] : kLargeLayers)
    for (const std::int64_t rows : {8, 16, 32, 64}) {
      std::vector<LayerData> data;
      for (int t = 0; t < machine.threads; ++t) data.emplace_back(rows, in, out);
      const double first = machine.per_call_on_all(data, [&](LayerData& d) { d.weight_grad(k); });
      const double later =
          machine.per_call_on_all(data, [&](LayerData& d) { d.weight_grad(k, 3); });
      extra += later - first;
      weights += static_cast<double>(in * out + out);
    }
  return extra / weights;
}

// One layer's three kernels (width -> width on `rows` rows) timed on every thread at once,
// each thread cycling through `copies` sets of the layer's operands, as a step cycles
// through its layers' and its replicas' data: seconds per call, and one thread's sets'
// bytes.
struct CycleTiming {
  double seconds = 0.0;
  double working_set_bytes = 0.0;
};
CycleTiming time_cycle(Machine& machine, std::int64_t rows, std::int64_t width,
                       std::int64_t copies) {
  const engine::Kernels& k = engine::kernels();
  struct Sets {
    std::vector<LayerData> sets;
    std::size_t next = 0;
  };
  std::vector<Sets> data(static_cast<std::size_t>(machine.threads));
  for (auto& d : data)
    for (std::int64_t c = 0; c < copies; ++c) d.sets.emplace_back(rows, width, width);
  CycleTiming cycle;
  cycle.working_set_bytes = static_cast<double>(copies * data[0].sets[0].bytes());
  cycle.seconds = machine.per_call_on_all(data, [&](Sets& s) {
    const LayerData& d = s.sets[s.next];
    s.next = (s.next + 1) % s.sets.size();
    d.forward(k);
    d.weight_grad(k);
    d.input_grad(k);
  });
  return cycle;
}

// The caches (config/device_profile.h gemm_cold_fraction): time_cycle of a 512 x 512
// layer (as fc2 and fc3) through 1 to 16 sets of operands; the micro-batches' timings
// summed, so one's noise moves the fit less.
constexpr std::int64_t kSweepCopies[] = {1, 2, 4, 8, 16};
constexpr std::int64_t kSweepWidth = 512;

CacheSweep cache_sweep(Machine& machine, std::vector<std::int64_t> micro_batches) {
  CacheSweep sweep;
  sweep.rows = std::move(micro_batches);
  for (const std::int64_t copies : kSweepCopies) {
    CacheSweep::Point point;
    for (const std::int64_t rows : sweep.rows) {
      const CycleTiming cycle = time_cycle(machine, rows, kSweepWidth, copies);
      point.working_set_bytes += cycle.working_set_bytes / static_cast<double>(sweep.rows.size());
      point.seconds += cycle.seconds;
    }
    sweep.points.push_back(point);
  }
  return sweep;
}

// The cache probe (cache_probe_seconds): the small-batch kernels of a 512 x 512 layer
// through 4 sets of operands, 8.3 MiB a thread. The small-batch kernels read the
// weight unpacked, at the rate the cache serves it: when other work on the host takes
// the shared last-level cache, this slows as standard mode's steps do.
constexpr std::int64_t kProbeCopies = 4;
constexpr double kProbeBatchSeconds = 0.004;

double cache_probe(Machine& machine) {
  // Batches of its own length, whatever the calibration's: a profile's probe and a run's
  // are the same measurement.
  const double batch = std::exchange(machine.batch, kProbeBatchSeconds);
  const double seconds =
      time_cycle(machine, planner::kSmallRows, kSweepWidth, kProbeCopies).seconds;
  machine.batch = batch;
  return seconds;
}

}  // namespace

ColdRamp fit_ramp(CacheSweep& sweep) {
  auto& pts = sweep.points;
  const double warm = pts.front().seconds;
  const double extra = pts.back().seconds - warm;
  if (extra <= 0.0) return {};
  for (auto& q : pts) q.cold_fraction = (q.seconds - warm) / extra;
  // The working set at which `level` of the extra is first paid, between two sets.
  const auto crossing = [&](double level) {
    for (std::size_t i = 1; i < pts.size(); ++i) {
      if (pts[i].cold_fraction < level) continue;
      const double f0 = std::clamp(pts[i - 1].cold_fraction, 0.0, level);
      const double t = (level - f0) / std::max(1e-9, pts[i].cold_fraction - f0);
      return pts[i - 1].working_set_bytes *
             std::pow(pts[i].working_set_bytes / pts[i - 1].working_set_bytes, t);
    }
    return pts.back().working_set_bytes;
  };
  const double quarter = crossing(0.25), three_quarters = crossing(0.75);
  const double ratio = std::max(three_quarters / quarter, 1.0 + 1e-9);
  return {quarter / std::sqrt(ratio), three_quarters * std::sqrt(ratio), extra};
}

namespace {

// A GEMM sweep's cold rate: per byte of the weight-sized operand its kernels read (the
// weight twice, its gradient once, for each micro-batch), what the coldest set adds.
double cold_operand_rate(const CacheSweep& sweep, const ColdRamp& ramp) {
  if (ramp.extra_seconds <= 0.0) return 0.0;
  return 3.0 * 4.0 * static_cast<double>(kSweepWidth * kSweepWidth) *
         static_cast<double>(sweep.rows.size()) / ramp.extra_seconds;
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

// The optimizer's step on state that comes from memory (config/device_profile.h
// cold_vector_flops_per_second): Adam with float32 and with float16 first moments, every
// thread cycling through kColdSets sets of its state (about 100 MiB a thread, past the
// caches), at the FLOPs the cost model counts (12 an element).
constexpr int kColdSets = 20;

double cold_vector_rate(Machine& machine) {
  const engine::Kernels& k = engine::kernels();
  struct Sets {
    std::vector<VectorData> sets = std::vector<VectorData>(kColdSets);
    std::size_t next = 0;
    VectorData& take() {
      VectorData& d = sets[next];
      next = (next + 1) % sets.size();
      return d;
    }
  };
  std::vector<Sets> data(static_cast<std::size_t>(machine.threads));
  const engine::AdamParams params;
  const double adam = machine.per_call_on_all(data, [&](Sets& s) {
    VectorData& d = s.take();
    k.adam_step(d.w.data(), d.g.data(), d.m.data(), d.v.data(), kAdam, d.t++, params);
  });
  const double adam_half = machine.per_call_on_all(data, [&](Sets& s) {
    VectorData& d = s.take();
    k.adam_step_half_m(d.w.data(), d.g.data(), d.m_half.data(), d.v.data(), kAdam, d.t++, params);
  });
  return 12.0 * 2 * kAdam / (adam + adam_half);
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

// The remote store's copies as its buffers outgrow the caches: every thread cycles
// through a store of kCopyStores bytes in entries of 128 KiB (a micro-batch's
// activations in the plans are 16 to 512 KiB), a load and a store a call, as a phased
// step's batch-serialised activations move.
constexpr std::int64_t kCopyStores[] = {2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20};
constexpr std::uint64_t kCopyEntry = 128 << 10;

CacheSweep copy_sweep(Machine& machine) {
  CacheSweep sweep;
  for (const std::int64_t store_bytes : kCopyStores) {
    std::vector<planner::RemoteBuffer> buffers(1);
    buffers[0].name = "activations";
    buffers[0].entry_bytes = kCopyEntry;
    buffers[0].rows = store_bytes / static_cast<std::int64_t>(kCopyEntry);
    struct Cycle {
      explicit Cycle(const std::vector<planner::RemoteBuffer>& b) : data(b) {}
      StoreData data;
      std::int64_t next = 0;
    };
    std::vector<Cycle> data;
    for (int t = 0; t < machine.threads; ++t) data.emplace_back(buffers);
    // The load from the entry the thread touched longest ago, the store to the one half
    // the store away: both cold once the store outgrows the caches, as a step's loads
    // and stores of its batch-serialised activations are.
    const std::int64_t half = buffers[0].rows / 2;
    const double call = machine.per_call_on_all(data, [&](Cycle& c) {
      c.data.store.load(0, c.next, c.data.bytes(), kCopyEntry);
      c.data.store.store(0, (c.next + half) % buffers[0].rows, c.data.bytes(), kCopyEntry);
      c.next = (c.next + 1) % buffers[0].rows;
    });
    sweep.points.push_back({static_cast<double>(store_bytes), call, 0.0});
  }
  return sweep;
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

// The median of `runs` runs of the thread pool, each after the caller has computed for
// `idle` seconds: past the threads' 50 us of spinning (engine/runtime/thread_pool.cpp)
// they have gone to sleep and are woken and waited for; right after another run they
// still spin.
double pool_run(Machine& machine, double idle, int runs) {
  std::vector<double> t;
  machine.pool.run(machine.threads, [](std::int64_t) {});
  for (int i = 0; i < runs; ++i) {
    const auto computing = Clock::now();
    while (since(computing) < idle) {
    }
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

// Every figure is measured once a pass, the passes one after another, and is the median
// of its kPasses values: on a shared machine a burst of someone else's work spoils one
// pass of a figure, not the figure; and a virtual machine that moves its CPUs for a few
// seconds (runner/placement.h) moves a pass or two, not all of one figure's rounds.
constexpr int kPasses = 5;
// The least accumulate_seconds written: a profile's 0 means "not measured".
constexpr double kAccumulateFloor = 1e-15;

// The median of f(0), ..., f(kPasses - 1).
template <typename F>
double median_of(F&& f) {
  std::vector<double> v;
  for (int r = 0; r < kPasses; ++r) v.push_back(f(r));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One pass: every figure once.
struct Pass {
  std::vector<GemmTiming> gemms;
  CacheSweep cache, small_rows_cache, copy_cache;
  double vector = 0.0, cold_vector = 0.0, accumulate = 0.0;
  Link streaming, host, collectives;
  double op_overhead = 0.0, barrier = 0.0, pool_run = 0.0, spread = 0.0;
  double round_trip = 0.0;
  double cache_probe = 0.0;
};

Pass measure_pass(Machine& machine) {
  Pass s;
  s.round_trip = core_round_trip_seconds();
  s.cache_probe = cache_probe(machine);
  for (const auto& [in, out] : kLayers)
    for (const std::int64_t rows : kRows) time_layer(machine, rows, in, out, s.gemms);
  s.cache = cache_sweep(machine, {16, 64});
  s.small_rows_cache = cache_sweep(machine, {planner::kSmallRows});
  s.vector = vector_rate(machine);
  s.accumulate = accumulate_seconds(machine);
  s.streaming = streaming(machine);
  s.copy_cache = copy_sweep(machine);
  s.cold_vector = cold_vector_rate(machine);
  s.host = host(machine);
  s.collectives = collectives(machine);
  s.op_overhead = op_overhead(machine);
  // Between a step's segments the pool's threads have slept; between a lone replica's
  // spread GEMMs they still spin.
  s.barrier = pool_run(machine, 200e-6, 100);
  s.pool_run = pool_run(machine, 0.0, 1000);
  // Priced from this pass's own GEMMs and pool run: measured minutes apart, the two
  // sides of the ratio could be on differently placed CPUs.
  if (machine.threads > 1) s.spread = spread_efficiency(machine, s.gemms, s.pool_run);
  return s;
}

std::string si(double v, const char* unit) {
  if (v >= 1e9) return fmt::format("{:.2f} G{}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.2f} M{}", v / 1e6, unit);
  return fmt::format("{:.3g} {}", v, unit);
}

}  // namespace

double cache_probe_seconds(int n_threads) {
  Machine machine(std::max(1, n_threads), kProbeBatchSeconds);
  return cache_probe(machine);
}

bool MachineCalibration::moved() const {
  const auto [lo, hi] = std::minmax_element(round_trips.begin(), round_trips.end());
  return lo != round_trips.end() && config::placement_differs(*lo, *hi);
}

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

  std::vector<Pass> passes;
  for (int i = 0; i < kPasses; ++i) passes.push_back(measure_pass(machine));
  // The median over the passes of a figure, given how to read it from one.
  const auto median = [&](auto&& figure) {
    return median_of([&](int i) { return figure(passes[static_cast<std::size_t>(i)]); });
  };
  c.gemms = passes.front().gemms;
  for (std::size_t i = 0; i < c.gemms.size(); ++i)
    c.gemms[i].seconds = median([&](const Pass& s) { return s.gemms[i].seconds; });
  c.gemm_fit_rms = fit_gemms(c.gemms, p);
  // A sweep's median set by set.
  const auto sweep = [&](CacheSweep Pass::*member) {
    CacheSweep m = passes.front().*member;
    for (std::size_t i = 0; i < m.points.size(); ++i)
      m.points[i].seconds = median([&](const Pass& s) { return (s.*member).points[i].seconds; });
    return m;
  };
  c.cache = sweep(&Pass::cache);
  const ColdRamp gemm = fit_ramp(c.cache);
  p.cache_warm_bytes = gemm.warm_bytes;
  p.cache_cold_bytes = gemm.cold_bytes;
  p.cold_gemm_bytes_per_second = cold_operand_rate(c.cache, gemm);
  c.small_rows_cache = sweep(&Pass::small_rows_cache);
  const ColdRamp small = fit_ramp(c.small_rows_cache);
  p.small_rows_warm_bytes = small.warm_bytes;
  p.small_rows_cold_bytes = small.cold_bytes;
  p.small_rows_cold_bytes_per_second = cold_operand_rate(c.small_rows_cache, small);

  p.vector_flops_per_second = median([](const Pass& s) { return s.vector; });
  // Within noise of nothing (or below), the fold is priced as nothing, not as FLOPs.
  p.accumulate_seconds =
      std::max(kAccumulateFloor, median([](const Pass& s) { return s.accumulate; }));
  const auto link = [&](Link Pass::*member) {
    const double bandwidth = median([&](const Pass& s) { return (s.*member).bytes_per_second; });
    const double latency = median([&](const Pass& s) { return (s.*member).latency_seconds; });
    return config::LinkProfile{bandwidth, latency, 1.0, 1.0};
  };
  p.streaming = link(&Pass::streaming);
  c.copy_cache = sweep(&Pass::copy_cache);
  const ColdRamp copies = fit_ramp(c.copy_cache);
  p.copy_warm_bytes = copies.warm_bytes;
  p.copy_cold_bytes = copies.cold_bytes;
  p.cold_copy_bytes_per_second =
      copies.extra_seconds > 0.0 ? 2.0 * kCopyEntry / c.copy_cache.points.back().seconds : 0.0;
  p.cold_vector_flops_per_second = median([](const Pass& s) { return s.cold_vector; });
  p.host = link(&Pass::host);
  p.ipu_link = link(&Pass::collectives);
  p.op_overhead_seconds = median([](const Pass& s) { return s.op_overhead; });
  p.barrier_seconds = median([](const Pass& s) { return s.barrier; });
  p.pool_run_seconds = median([](const Pass& s) { return s.pool_run; });
  // With one thread nothing is spread: 0, priced as 1. Spread blocks measured faster than
  // beside other threads' GEMMs are within the noise: at most 1, as an efficiency is.
  if (threads > 1)
    p.gemm_spread_efficiency = std::min(1.0, median([](const Pass& s) { return s.spread; }));
  // Host and remote transfers are copies on the replica's own thread: nothing
  // synchronises beyond what the links' latencies measured.
  p.sync_overhead_seconds = 0.0;
  p.core_round_trip_seconds = median([](const Pass& s) { return s.round_trip; });
  for (const Pass& s : passes) c.round_trips.push_back(s.round_trip);
  p.cache_probe_seconds = median([](const Pass& s) { return s.cache_probe; });

  c.measured = {
      {"element-wise (Adam, GELU gradient)", p.vector_flops_per_second, "FLOP/s"},
      {"optimizer step, state from memory", p.cold_vector_flops_per_second, "FLOP/s"},
      {"accumulators' running mean, per weight", p.accumulate_seconds * 1e12, "ps"},
      {"one replica's GEMMs spread, of the price", p.gemm_spread_efficiency * 100, "%"},
      {"streaming copy (RemoteStore, 1 MiB)", p.streaming.bytes_per_second, "B/s"},
      {"host stream (pixel normalisation)", p.host.bytes_per_second, "B/s"},
      {"collective bandwidth (all-reduce, 1 MiB)", p.ipu_link.bytes_per_second, "B/s"},
      {"collective latency (per exchange)", p.ipu_link.latency_seconds * 1e6, "µs"},
      {"compute op overhead", p.op_overhead_seconds * 1e6, "µs"},
      {"thread pool barrier (threads asleep)", p.barrier_seconds * 1e6, "µs"},
      {"thread pool run (threads spinning)", p.pool_run_seconds * 1e6, "µs"},
      {"core round trip (where the CPUs are)", p.core_round_trip_seconds * 1e9, "ns"},
      {"cache probe (8.3 MiB a thread)", p.cache_probe_seconds * 1e6, "µs"},
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
  const auto print_sweep = [&](const CacheSweep& sweep, double warm, double cold, double rate) {
    const std::string what =
        sweep.rows.empty()
            ? fmt::format("the remote store's copies, entries of {} KiB", kCopyEntry >> 10)
            : fmt::format("a {}x{} layer's kernels, micro-batches {}", kSweepWidth, kSweepWidth,
                          fmt::join(sweep.rows, " and "));
    fmt::print(out,
               "caches ({}, every thread cycling through its working set)\n{:>12} {:>15} "
               "{:>14}\n",
               what, "working set", "time", "cold fraction");
    for (const auto& q : sweep.points)
      fmt::print(out, "{:>8.1f} MiB {:>12.1f} µs {:>14.2f}\n", q.working_set_bytes / (1 << 20),
                 q.seconds * 1e6, q.cold_fraction);
    fmt::print(out, "fit: warm up to {:.1f} MiB, cold from {:.1f} MiB, cold {} {}\n\n",
               warm / (1 << 20), cold / (1 << 20), sweep.rows.empty() ? "copies" : "operands",
               si(rate, "B/s"));
  };
  const config::DeviceProfile& p = c.profile;
  print_sweep(c.cache, p.cache_warm_bytes, p.cache_cold_bytes, p.cold_gemm_bytes_per_second);
  print_sweep(c.small_rows_cache, p.small_rows_warm_bytes, p.small_rows_cold_bytes,
              p.small_rows_cold_bytes_per_second);
  print_sweep(c.copy_cache, p.copy_warm_bytes, p.copy_cold_bytes, p.cold_copy_bytes_per_second);
  for (const auto& m : c.measured)
    fmt::print(out, "{:<42} {}\n", m.what,
               m.unit == "µs" || m.unit == "ns" || m.unit == "ps" || m.unit == "%"
                   ? fmt::format("{:.2f} {}", m.value, m.unit)
                   : si(m.value, m.unit.c_str()));
  if (c.moved()) {
    std::vector<long> ns;
    for (const double t : c.round_trips) ns.push_back(std::lround(t * 1e9));
    fmt::print(out,
               "note: the machine moved its CPUs during the calibration (the passes' core round "
               "trips: {} ns); each figure is the median of its passes'\n",
               fmt::join(ns, " "));
  }
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
