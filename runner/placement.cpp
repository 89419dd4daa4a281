// The cache line's round trip between two CPUs (runner/placement.h).
#include "runner/placement.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace popkit::runner {
namespace {

// Batches short enough to fit in one time slice of a CPU shared with other work: a
// thread that is preempted mid-batch makes that batch slow, not the figure.
constexpr int kBatches = 11;
constexpr int kTrips = 1000;
constexpr double kGiveUp = 0.25;  // seconds for all of them, in one attempt
// A machine busy with other work can keep one of the two threads off its CPU for a whole
// attempt; a fresh attempt a moment later usually finds both running.
constexpr int kAttempts = 4;

// One attempt: the fastest batch's round trip, or 0 when the threads could not be pinned
// or did not finish within kGiveUp.
double one_attempt(const std::vector<int>& cpus);

}  // namespace

std::vector<int> allowed_cpus(int n) {
  std::vector<int> cpus;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && std::ssize(cpus) < n; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  return cpus;
}

bool pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

double core_round_trip_seconds() {
  const std::vector<int> cpus = allowed_cpus(2);
  if (cpus.size() < 2) return 0.0;
  for (int a = 0; a < kAttempts; ++a) {
    if (a > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (const double seconds = one_attempt(cpus); seconds > 0) return seconds;
  }
  return 0.0;
}

namespace {

double one_attempt(const std::vector<int>& cpus) {
  // One line, written in turn: the pinger writes odd values, the ponger answers each
  // with the next even one. Two threads that cannot both run (one CPU in fact) would
  // take a time slice a trip: past kGiveUp, no figure.
  alignas(64) std::atomic<std::int64_t> line{0};
  std::atomic<bool> failed{false};
  constexpr std::int64_t kTotal = std::int64_t{kBatches} * kTrips;
  std::thread ponger([&] {
    if (!pin_this_thread(cpus[1])) failed.store(true);
    for (std::int64_t i = 0; i < kTotal && !failed.load(std::memory_order_relaxed); ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1)
        if (failed.load(std::memory_order_relaxed)) return;
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::vector<double> per_trip;
  std::thread pinger([&] {
    if (!pin_this_thread(cpus[0])) failed.store(true);
    const auto start = std::chrono::steady_clock::now();
    const auto since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    for (int b = 0; b < kBatches && !failed.load(); ++b) {
      const auto t0 = std::chrono::steady_clock::now();
      for (std::int64_t i = std::int64_t{b} * kTrips; i < std::int64_t{b + 1} * kTrips; ++i) {
        line.store(2 * i + 1, std::memory_order_release);
        for (std::int64_t spins = 1; line.load(std::memory_order_acquire) != 2 * i + 2; ++spins)
          if (spins % 4096 == 0 && since(start) > kGiveUp) {
            failed.store(true);
            return;
          }
      }
      per_trip.push_back(since(t0) / kTrips);
    }
  });
  pinger.join();
  ponger.join();
  if (failed.load()) return 0.0;  // not where it was asked, or not in time: no figure
  // The fastest batch: where the CPUs are, without the time another thread took them.
  return *std::min_element(per_trip.begin(), per_trip.end());
}

}  // namespace

}  // namespace popkit::runner
