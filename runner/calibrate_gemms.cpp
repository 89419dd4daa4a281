// One linear layer's kernels timed and fitted for poprun calibrate; see
// runner/calibrate_gemms.h.
#include "runner/calibrate_gemms.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/kernels/linear.h"
#include "planner/calibrate.h"

namespace popkit::runner {
namespace calibration {
namespace {

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
        wg(planner::linear_grad_workspace(rows, in, out)),
        wd(planner::linear_dx_workspace(rows, in, out)) {}

  // Each kernel runs its column blocks one after another, or with `pool` spread over its
  // threads as the engine spreads a lone replica's (engine/engine.cpp in_column_blocks).
  void forward(const engine::LinearKernels& k, engine::ThreadPool* pool = nullptr) const {
    in_tiles(pool, rows, in, out, [&](const planner::GemmTile& t) {
      k.forward_columns(config::Activation::kNone, x.data() + t.r0 * in, w.data(), b.data(),
                        y.data() + t.r0 * out, y.data() + t.r0 * out, t.r1 - t.r0, in, out, t.j0,
                        t.j1, wf.at(t.region), wf.region_bytes);
    });
  }
  // At micro-batch `step` of an accumulation: after the first, the kernels fold the
  // gradient into the accumulators' running mean.
  void weight_grad(const engine::LinearKernels& k, std::int64_t step = 0,
                   engine::ThreadPool* pool = nullptr) const {
    in_blocks(pool, rows * in, out, [&](std::int64_t j0, std::int64_t j1) {
      k.grad_columns(dz.data(), x.data(), gw.data(), gb.data(), rows, in, out, step, j0, j1,
                     wg.of(j0), wg.region_bytes);
    });
  }
  void input_grad(const engine::LinearKernels& k, engine::ThreadPool* pool = nullptr) const {
    in_tiles(pool, rows, out, in, [&](const planner::GemmTile& t) {
      k.dx_columns(dz.data() + t.r0 * out, w.data(), dx.data() + t.r0 * in, t.r1 - t.r0, in, out,
                   t.j0, t.j1, wd.at(t.region), wd.region_bytes);
    });
  }
  [[nodiscard]] std::uint64_t bytes() const {
    std::uint64_t n = wf.bytes + wg.bytes + wd.bytes;
    for (const Floats* f : {&x, &w, &b, &y, &dz, &gw, &gb, &dx}) n += f->bytes;
    return n;
  }

  std::int64_t rows, in, out;
  Floats x, w, b, y, dz, gw, gb, dx;
  Workspace wf, wg, wd;

 private:
  // Blocks [0, blocks) as `tasks` tasks of `pool` (task r runs blocks r, r + tasks, ...),
  // or one after another without one.
  template <typename Fn>
  static void on_pool(engine::ThreadPool* pool, std::int64_t blocks, std::int64_t tasks,
                      Fn&& block) {
    if (pool != nullptr && blocks > 1) {
      pool->run(tasks, [&](std::int64_t r) {
        for (std::int64_t b = r; b < blocks; b += tasks) block(b);
      });
      return;
    }
    for (std::int64_t b = 0; b < blocks; ++b) block(b);
  }
  template <typename Fn>
  static void in_blocks(engine::ThreadPool* pool, std::int64_t rows_x_inner, std::int64_t n_cols,
                        Fn&& fn) {
    const planner::ColumnBlocks cb = planner::column_blocks(rows_x_inner, n_cols);
    on_pool(pool, cb.n, cb.n, [&](std::int64_t j) {
      fn(j * cb.width, cb.n == 1 ? n_cols : std::min(n_cols, (j + 1) * cb.width));
    });
  }
  // The tiles of a linear's forward or input gradient (planner::gemm_tiles), as the
  // engine runs them (engine/exec/op_runner.cpp in_gemm_tiles).
  template <typename Fn>
  static void in_tiles(engine::ThreadPool* pool, std::int64_t rows, std::int64_t inner,
                       std::int64_t n_cols, Fn&& fn) {
    const planner::ColumnBlocks cb = planner::gemm_tiles(rows, inner, n_cols);
    on_pool(pool, cb.blocks(), cb.regions(),
            [&](std::int64_t b) { fn(planner::gemm_tile(cb, b, rows, n_cols)); });
  }
};

// One linear layer's three kernels on `rows` rows, timed on every thread at once, as
// GEMMs of the cost model (planner/layer_kinds.h): forward [rows, in] x [in, out]; weight
// gradient in^T dz, m = in, n = out, k = rows; input gradient dz W^T, m = rows, n = in,
// k = out.
void time_layer(Machine& machine, std::int64_t rows, std::int64_t in, std::int64_t out,
                std::vector<GemmTiming>& timings) {
  const engine::LinearKernels& k = engine::kernels_of<engine::LinearKernels>();
  std::vector<LayerData> data;
  for (int t = 0; t < machine.threads; ++t) data.emplace_back(rows, in, out);
  const double forward = machine.per_call_on_all(data, [&](LayerData& d) { d.forward(k); });
  const double grad = machine.per_call_on_all(data, [&](LayerData& d) { d.weight_grad(k); });
  const double input = machine.per_call_on_all(data, [&](LayerData& d) { d.input_grad(k); });
  timings.push_back({"forward", rows, out, in, rows, forward, 0.0});
  timings.push_back({"weight grad", in, out, rows, rows, grad, 0.0});
  timings.push_back({"input grad", rows, in, out, rows, input, 0.0});
}

}  // namespace

void time_layers(Machine& machine, std::vector<GemmTiming>& timings) {
  for (const auto& [in, out] : kLayers)
    for (const std::int64_t rows : kRows) time_layer(machine, rows, in, out, timings);
}

// A lone replica's GEMMs spread over the threads (config/device_profile.h
// gemm_spread_efficiency): one layer's three kernels with their column blocks on the pool,
// as the engine runs them for R = 1, against their price from the kernels timed on every
// thread at once (`gemms`): each kernel's share of its blocks (the slowest thread's,
// planner's column_share) and a run of the pool with its threads spinning. The priced
// time over the measured, summed over the MNIST plans' two large layers at 8-256 rows.
double spread_efficiency(Machine& machine, const std::vector<GemmTiming>& gemms,
                         double pool_run_seconds) {
  const engine::LinearKernels& k = engine::kernels_of<engine::LinearKernels>();
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
        const planner::ColumnBlocks cb =
            grad ? planner::column_blocks(g.m * g.k, g.n) : planner::gemm_tiles(g.m, g.k, g.n);
        priced += cb.blocks() == 1
                      ? g.seconds
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
  const engine::LinearKernels& k = engine::kernels_of<engine::LinearKernels>();
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

namespace {

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
  const engine::LinearKernels& k = engine::kernels_of<engine::LinearKernels>();
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

constexpr std::int64_t kSweepCopies[] = {1, 2, 4, 8, 16};

}  // namespace

// The caches (config/device_profile.h gemm_cold_fraction): time_cycle of a 512 x 512
// layer (as fc2 and fc3) through 1 to 16 sets of operands; the micro-batches' timings
// summed, so one's noise moves the fit less.
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

double cache_probe(Machine& machine) {
  // Batches of its own length, whatever the calibration's: a profile's probe and a run's
  // are the same measurement.
  const double batch = std::exchange(machine.batch, kProbeBatchSeconds);
  const double seconds =
      time_cycle(machine, planner::kSmallRows, kSweepWidth, kProbeCopies).seconds;
  machine.batch = batch;
  return seconds;
}

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

}  // namespace calibration

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

}  // namespace popkit::runner
