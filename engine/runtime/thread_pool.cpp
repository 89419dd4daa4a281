// ThreadPool and IoThread, with every shared field under one mutex or atomic, so the
// thread sanitizer has nothing to say.
#include "engine/runtime/thread_pool.h"

#include <chrono>
#include <utility>

namespace popkit::engine {
namespace {

// A pool thread that waits polls for up to kSpin before sleeping on a condition
// variable: the engine runs many short jobs per step (a phased step has tens), and a
// futex wake-up plus context switch costs as much as a short job. The poll yields, so a
// runnable thread (the IO thread) still gets the core.
constexpr auto kSpin = std::chrono::microseconds(50);

template <typename Ready>
void spin_until(const Ready& ready) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!ready() && std::chrono::steady_clock::now() - t0 < kSpin) std::this_thread::yield();
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

IoThread::IoThread() : thread_([this] { loop(); }) {}

IoThread::~IoThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void IoThread::start(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    job_ = std::move(job);
    has_job_ = true;
    done_ = false;
    error_ = nullptr;
  }
  cv_.notify_all();
}

void IoThread::wait() {
  std::exception_ptr error;
  std::function<void()> job;
  {
    std::unique_lock lock(mu_);
    // A job the thread has not picked up yet (it was not scheduled: the cores are busy)
    // runs here instead of waiting for a time slice.
    if (has_job_) {
      job = std::move(job_);
      has_job_ = false;
    } else {
      cv_.wait(lock, [&] { return done_; });
      error = std::exchange(error_, nullptr);
    }
  }
  if (job) {
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mu_);
    done_ = true;
  }
  if (error) std::rethrow_exception(error);
}

void IoThread::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || has_job_; });
      if (stop_) return;
      job = std::move(job_);
      has_job_ = false;
    }
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      error_ = error;
      done_ = true;
    }
    cv_.notify_all();
  }
}

}  // namespace popkit::engine
