// Threads of the executor. ThreadPool runs one bulk-synchronous step: task i for every
// i in [0, n), in parallel, and returns when all are done (the engine's tasks are the
// replicas). IoThread is the dedicated thread of io_overlapped: one job at a time,
// started, then waited for, while the caller computes.
// Exceptions thrown by tasks are carried back to the caller; the lowest task index wins,
// so the error reported never depends on thread timing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace popkit::engine {

class ThreadPool {
 public:
  // n_threads counts the caller, which works too; 1 means no extra thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(threads_.size()) + 1; }

  void run(std::int64_t n_tasks, const std::function<void(std::int64_t)>& fn);

 private:
  // One run's state. Workers hold it by shared_ptr, so a worker that wakes after the run
  // ended finds its counter exhausted and never touches the next run's tasks.
  struct Job {
    const std::function<void(std::int64_t)>* fn = nullptr;
    std::int64_t n_tasks = 0;
    std::atomic<std::int64_t> next{0};
    std::atomic<std::int64_t> n_done{0};     // written under the pool's mu_
    std::vector<std::exception_ptr> errors;  // one writer per index
  };

  void worker();
  void work_on(Job& job);

  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  std::vector<std::thread> threads_;
  std::shared_ptr<Job> job_;                  // the current run (under mu_)
  std::atomic<std::uint64_t> generation_{0};  // written under mu_, polled by spin_until
  bool stop_ = false;
};

class IoThread {
 public:
  IoThread();
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Starts `job`; the previous job must have been waited for.
  void start(std::function<void()> job);
  // Blocks until the job is done and rethrows its exception. A job the thread has not
  // picked up yet runs on the caller.
  void wait();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool has_job_ = false;
  bool done_ = true;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace popkit::engine
