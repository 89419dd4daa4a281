// ThreadPool and IoQueue, with every shared field under one mutex or atomic, so the
// thread sanitizer has nothing to say.
#include "engine/runtime/thread_pool.h"

#include <chrono>
#include <utility>

#include "engine/runtime/float_mode.h"

namespace popkit::engine {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A pool thread that waits polls for up to kSpin before sleeping on a condition
// variable: the engine runs many short jobs per step (a phased step has tens), and a
// futex wake-up plus context switch costs as much as a short job. The poll yields, so a
// runnable thread still gets the core.
constexpr auto kSpin = std::chrono::microseconds(50);
// The IO thread has a core of its own (the engine makes it only then): it polls longer,
// across a repeat step's compute, so a posted piece starts at once.
constexpr auto kIoSpin = std::chrono::microseconds(500);

// Polls ready() for up to `limit`, calling relax() between polls.
template <typename Ready, typename Relax>
void poll_until(const Ready& ready, std::chrono::microseconds limit, const Relax& relax) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!ready() && std::chrono::steady_clock::now() - t0 < limit) relax();
}

template <typename Ready>
void spin_until(const Ready& ready) {
  poll_until(ready, kSpin, [] { std::this_thread::yield(); });
}

// The IO thread's poll: PAUSE rather than sched_yield, as its core may be the SMT
// sibling of a compute thread's (a virtual machine's CPUs often are), and a loop of
// system calls takes the shared core's issue slots from it.
template <typename Ready>
void pause_until(const Ready& ready) {
  poll_until(ready, kIoSpin, [] {
    for (int i = 0; i < 32; ++i) cpu_relax();
  });
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  for (int i = 1; i < n_threads; ++i) threads_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::work_on(Job& job) {
  std::int64_t done = 0;
  for (std::int64_t i = job.next.fetch_add(1); i < job.n_tasks; i = job.next.fetch_add(1)) {
    try {
      (*job.fn)(i);
    } catch (...) {
      job.errors[static_cast<std::size_t>(i)] = std::current_exception();
    }
    ++done;
  }
  if (done == 0) return;
  std::lock_guard lock(mu_);
  if (job.n_done.fetch_add(done) + done == job.n_tasks) cv_done_.notify_all();
}

void ThreadPool::worker() {
  flush_denormals_on_this_thread();  // as the engine's caller during a step
  std::uint64_t seen = 0;
  for (;;) {
    std::shared_ptr<Job> job;
    spin_until([&] { return generation_.load() != seen; });
    {
      std::unique_lock lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    if (job) work_on(*job);
  }
}

void ThreadPool::run(std::int64_t n_tasks, const std::function<void(std::int64_t)>& fn) {
  if (n_tasks <= 0) return;
  if (threads_.empty() || n_tasks == 1) {
    for (std::int64_t i = 0; i < n_tasks; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n_tasks = n_tasks;
  job->errors.assign(static_cast<std::size_t>(n_tasks), nullptr);
  {
    std::lock_guard lock(mu_);
    job_ = job;
    ++generation_;
  }
  cv_work_.notify_all();
  work_on(*job);
  spin_until([&] { return job->n_done.load() == job->n_tasks; });
  {
    std::unique_lock lock(mu_);
    cv_done_.wait(lock, [&] { return job->n_done == job->n_tasks; });
    job_.reset();
  }
  for (auto& e : job->errors)
    if (e) std::rethrow_exception(e);
}

IoQueue::IoQueue(std::int64_t n_slots)
    : slots_(static_cast<std::size_t>(n_slots)), thread_([this] { loop(); }) {}

IoQueue::~IoQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  thread_.join();
}

void IoQueue::post(std::int64_t slot, const std::function<void(std::int64_t)>& fn,
                   std::int64_t arg) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    Slot& s = slots_.at(static_cast<std::size_t>(slot));
    s.fn = &fn;
    s.arg = arg;
    s.error = nullptr;
    s.state = State::kQueued;
    queue_.push_back(slot);
    n_queued_.fetch_add(1);
    wake = sleeping_;
  }
  if (wake) cv_work_.notify_one();
}

void IoQueue::run(Slot& slot, std::unique_lock<std::mutex>& lock) {
  slot.state = State::kRunning;
  const auto* fn = slot.fn;
  const std::int64_t arg = slot.arg;
  lock.unlock();
  std::exception_ptr error;
  try {
    (*fn)(arg);
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  slot.error = error;
  slot.state = State::kIdle;
}

void IoQueue::wait(std::int64_t slot) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  {
    std::unique_lock lock(mu_);
    // Not begun: the thread is busy with other slots' pieces or was not scheduled, so
    // the caller runs it rather than wait. The queue entry stays; the thread skips it,
    // the slot being no longer queued.
    if (s.state == State::kQueued) run(s, lock);
  }
  spin_until([&] { return s.state.load() == State::kIdle; });
  std::unique_lock lock(mu_);
  cv_done_.wait(lock, [&] { return s.state == State::kIdle; });
  if (s.error) std::rethrow_exception(std::exchange(s.error, nullptr));
}

void IoQueue::loop() {
  flush_denormals_on_this_thread();
  for (;;) {
    pause_until([&] { return n_queued_.load() > 0 || stop_.load(); });
    std::unique_lock lock(mu_);
    sleeping_ = true;
    cv_work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    sleeping_ = false;
    if (stop_) return;
    Slot& s = slots_[static_cast<std::size_t>(queue_.front())];
    queue_.pop_front();
    n_queued_.fetch_sub(1);
    if (s.state != State::kQueued) continue;  // its waiter ran it
    run(s, lock);
    lock.unlock();
    cv_done_.notify_all();
  }
}

}  // namespace popkit::engine
