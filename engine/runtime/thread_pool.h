// Threads of the executor. ThreadPool runs one bulk-synchronous step: task i for every
// i in [0, n), in parallel, and returns when all are done (the engine's tasks are the
// replicas). IoQueue is the IO thread of io_overlapped: pieces of IO posted per replica
// and waited for per replica, while the replicas compute.
// Exceptions thrown by tasks are carried back to the caller; the lowest task index wins,
// so the error reported never depends on thread timing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
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

// The IO thread of io_overlapped. Each replica has a slot holding at most one piece of
// IO in flight: post(slot, fn, arg) queues fn(arg) and returns at once; wait(slot)
// returns when that piece is done and rethrows its exception. A piece the thread has
// not begun runs on the waiting caller instead: it would only sit idle otherwise.
// Pieces run in the order posted. `fn` must outlive the wait for its piece.
// The engine makes one only when a core is free for it, so the thread polls for work
// for a while before sleeping, and a waiter polls before sleeping: a futex wake-up
// costs more than a piece (tens of microseconds on a virtual machine).
class IoQueue {
 public:
  explicit IoQueue(std::int64_t n_slots);
  ~IoQueue();
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  // The slot's previous piece must have been waited for.
  void post(std::int64_t slot, const std::function<void(std::int64_t)>& fn, std::int64_t arg);
  void wait(std::int64_t slot);

 private:
  enum class State : unsigned char { kIdle, kQueued, kRunning };
  struct Slot {
    std::atomic<State> state{State::kIdle};  // written under mu_, polled by waiters
    const std::function<void(std::int64_t)>* fn = nullptr;
    std::int64_t arg = 0;
    std::exception_ptr error;
  };

  void loop();
  void run(Slot& slot, std::unique_lock<std::mutex>& lock);  // kQueued -> kIdle, lock held

  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  std::vector<Slot> slots_;
  std::deque<std::int64_t> queue_;         // slots in the order posted
  std::atomic<std::int64_t> n_queued_{0};  // queue_.size(), polled by the thread
  bool sleeping_ = false;                  // the thread waits on cv_work_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace popkit::engine
