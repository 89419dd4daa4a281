// poprun calibrate's measurements beyond the GEMMs; see runner/calibrate_runtime.h.
#include "runner/calibrate_runtime.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/kernels/adam.h"
#include "engine/kernels/linear.h"
#include "engine/runtime/collectives.h"
#include "engine/runtime/remote_store.h"
#include "engine/tensor/adam.h"

namespace popkit::runner::calibration {
namespace {

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

}  // namespace

double vector_rate(Machine& machine) {
  const engine::AdamKernels& k = engine::kernels_of<engine::AdamKernels>();
  const engine::LinearKernels& linear = engine::kernels_of<engine::LinearKernels>();
  std::vector<VectorData> data(static_cast<std::size_t>(machine.threads));
  const engine::AdamParams params;
  const double adam = machine.per_call_on_all(data, [&](VectorData& d) {
    k.step(d.w.data(), d.g.data(), d.m.data(), d.v.data(), kAdam, d.t++, params);
  });
  const double adam_half = machine.per_call_on_all(data, [&](VectorData& d) {
    k.step_half_m(d.w.data(), d.g.data(), d.m_half.data(), d.v.data(), kAdam, d.t++, params);
  });
  const double gelu = machine.per_call_on_all(data, [&](VectorData& d) {
    linear.activation_backward(config::Activation::kGelu, d.pre.data(), d.dy.data(), kGelu);
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
  const engine::AdamKernels& k = engine::kernels_of<engine::AdamKernels>();
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
    k.step(d.w.data(), d.g.data(), d.m.data(), d.v.data(), kAdam, d.t++, params);
  });
  const double adam_half = machine.per_call_on_all(data, [&](Sets& s) {
    VectorData& d = s.take();
    k.step_half_m(d.w.data(), d.g.data(), d.m_half.data(), d.v.data(), kAdam, d.t++, params);
  });
  return 12.0 * 2 * kAdam / (adam + adam_half);
}

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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
  const engine::LinearKernels& k = engine::kernels_of<engine::LinearKernels>();
  Floats x(8), w(8), b(8), y(8);
  Workspace ws(planner::linear_forward_call_workspace(1, 1, 0, 1));
  return per_call(
      [&] {
        const auto t0 = Clock::now();
        k.forward_columns(config::Activation::kNone, x.data(), w.data(), b.data(), y.data(),
                          y.data(), 1, 1, 1, 0, 1, ws.data(), ws.bytes);
        static_cast<void>(since(t0));
      },
      batch);
}

// Every figure is measured once a pass, the passes one after another, and is the median

}  // namespace popkit::runner::calibration
