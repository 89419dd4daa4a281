// What a copy costs when another CPU holds the lines it touches: the cost behind the far
// placement of bench/README.md ("Where the CPUs are"), where a virtual machine's two CPUs
// sit on two last-level caches and phased R 2 x 8 x 4's all-gathers take 10x as long. One
// copy of `bytes` on the first CPU this process may run on, after the second has written
// or read the destination or the source; plain (memcpy) or with streaming stores, which
// write a line without first fetching it. The counters `trip_start_ns` and `trip_end_ns`
// are the cache line's round trip between the two CPUs (runner/placement.h) before and
// after: tens of nanoseconds on one cache, hundreds across two. The placement moves by
// itself, so repeat and sort the repetitions by round trip:
//
//   build/native/bench/cross_core_bench --benchmark_repetitions=20 --benchmark_format=csv
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "runner/placement.h"

namespace {

// f() on a thread of its own pinned to `cpu`, waited for; false (f not run) when the
// thread could not be pinned there.
template <typename F>
bool on_cpu(int cpu, F&& f) {
  bool pinned = false;
  std::thread t([&] {
    pinned = popkit::runner::pin_this_thread(cpu);
    if (pinned) f();
  });
  t.join();
  return pinned;
}

// Streaming stores where the CPU has them (SSE2: every x86-64); memcpy elsewhere.
void stream_copy(std::byte* dst, const std::byte* src, std::size_t n) {
#if defined(__SSE2__)
  const std::size_t head = (64 - reinterpret_cast<std::uintptr_t>(dst) % 64) % 64;
  if (n < head + 64) {
    std::memcpy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, head);
  std::size_t i = head;
  for (; i + 64 <= n; i += 64)
    for (std::size_t k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + k)));
  _mm_sfence();  // the streamed lines are visible before the copy counts as done
  std::memcpy(dst + i, src + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

// Which lines the other CPU holds when the copy starts.
enum Before : int {
  kOwn = 0,        // this CPU wrote source and destination: nothing is elsewhere
  kOtherWroteDst,  // the other CPU wrote the destination (its lines modified there)
  kOtherReadDst,   // this CPU wrote the destination, the other read it (shared by both)
  kOtherWroteSrc,  // the other CPU wrote the source; this one the destination
};

void BM_Copy(benchmark::State& state) {
  const auto before = static_cast<Before>(state.range(0));
  const bool streaming = state.range(1) != 0;
  const auto bytes = static_cast<std::size_t>(state.range(2));
  // The two the round trip is measured between.
  const std::vector<int> cpus = popkit::runner::allowed_cpus(2);
  if (cpus.size() < 2) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  std::vector<std::byte> src(bytes), dst(bytes);
  const double trip_start = popkit::runner::core_round_trip_seconds();
  int fill = 0;
  const auto write = [&](std::vector<std::byte>& v) {
    std::memset(v.data(), ++fill & 0xff, v.size());
  };
  // Who last touched what before the copy: cpus[0] copies, cpus[1] is the other.
  const int src_writer = cpus[before == kOtherWroteSrc ? 1 : 0];
  const int dst_writer = cpus[before == kOtherWroteDst ? 1 : 0];
  const bool other_reads_dst = before == kOtherReadDst;
  double seconds = 0.0;
  const auto read_dst = [&] {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < bytes; i += 64) sum += static_cast<std::uint64_t>(dst[i]);
    benchmark::DoNotOptimize(sum);
  };
  const auto copy = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    if (streaming)
      stream_copy(dst.data(), src.data(), bytes);
    else
      std::memcpy(dst.data(), src.data(), bytes);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (auto _ : state) {
    bool pinned =
        on_cpu(src_writer, [&] { write(src); }) && on_cpu(dst_writer, [&] { write(dst); });
    if (pinned && other_reads_dst) pinned = on_cpu(cpus[1], read_dst);
    pinned = pinned && on_cpu(cpus[0], copy);
    if (!pinned) {
      state.SkipWithError("could not pin a thread to its CPU");
      break;
    }
    benchmark::DoNotOptimize(dst.data());
    state.SetIterationTime(seconds);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
  state.counters["trip_start_ns"] = trip_start * 1e9;
  state.counters["trip_end_ns"] = popkit::runner::core_round_trip_seconds() * 1e9;
}

// 800 KiB: about a shard of fc1's weight (784 x 512 floats) over two replicas, what phased
// R 2 x 8 x 4 gathers.
BENCHMARK(BM_Copy)
    ->ArgNames({"before", "streaming", "bytes"})
    ->ArgsProduct({{kOwn, kOtherWroteDst, kOtherReadDst, kOtherWroteSrc}, {0, 1}, {800 << 10}})
    ->UseManualTime()
    ->Iterations(50)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
