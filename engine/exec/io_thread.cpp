// The IO thread of io_overlapped and of preload (io_thread.h).
#include "engine/exec/io_thread.h"

#include <algorithm>
#include <array>
#include <exception>

#include "planner/operands.h"

namespace popkit::engine {
namespace {

using planner::Op;
using planner::OpKind;

// io_overlapped with the IO thread: the loads and stores of double-buffered tensors
// leave the step's compute. Piece s of a replica is its stores of step s-1, then its
// loads of step s+1 (s-1 and s+1 share a slot, so stores go first); the IO thread runs
// it while the replica computes step s, or the replica itself if the thread has not
// begun it when the replica needs step s+1's data. Each replica runs the whole repeat
// as one task, waiting only for its own pieces: no barrier per step. A failure
// reported is the earliest by (step, position), then the lowest replica; piece s
// counts as the start of step s+1, where its data is needed.
class OverlappedRepeat {
 public:
  // A step's ops: the stores and loads the IO thread moves, and the rest.
  struct Ops {
    std::vector<const Op*> stores, loads, compute;
  };

  OverlappedRepeat(EngineState& m, const OpRunner& ops, IoQueue& queue, Ops step_ops,
                   std::int64_t steps)
      : m_(m),
        ops_(ops),
        queue_(queue),
        step_(std::move(step_ops)),
        steps_(steps),
        state_(static_cast<std::size_t>(m.hosted.n)) {
    piece_job_ = [this](std::int64_t arg) {
      io_piece(m_.hosted.first + arg % m_.hosted.n, arg / m_.hosted.n);
    };
  }

  void run(planner::SegmentRun run) {
    m_.on_every_replica(run, [this](std::int64_t r) { replica_task(r); });
    m_.add_slowest_segment_seconds();
    // IO time per category: the slowest replica's, as for compute (on top of the
    // compute time, so the categories can sum to more than the wall).
    for (std::size_t c = 0; c < kNumOpCategories; ++c) {
      double slowest = 0.0;
      for (const ReplicaIo& st : state_) slowest = std::max(slowest, st.seconds[c]);
      m_.add_seconds(static_cast<OpCategory>(c), slowest);
    }
    const ReplicaIo* failed = nullptr;
    for (const ReplicaIo& st : state_)
      if (st.error && (failed == nullptr || st.error_at < failed->error_at)) failed = &st;
    if (failed != nullptr) std::rethrow_exception(failed->error);
  }

 private:
  using Position = std::array<std::int64_t, 3>;  // (step, 0 = IO | 1 + op, op in piece)
  // Per replica, written by its thread or by the thread running its piece (one at a
  // time, ordered by the queue's waits); a cache line each, as both replicas write theirs.
  struct alignas(64) ReplicaIo {
    std::array<double, kNumOpCategories> seconds{};
    std::int64_t at = 0;  // the piece's ops begun, for the position of a failure
    std::exception_ptr error;
    Position error_at{};
  };

  void io_piece(std::int64_t r, std::int64_t s) {
    ReplicaIo& st = state_[static_cast<std::size_t>(m_.local(r))];
    st.at = 0;
    for (const bool load : {false, true}) {
      const std::int64_t step = load ? s + 1 : s - 1;
      if (step < 0 || step >= steps_) continue;
      for (const Op* o : load ? step_.loads : step_.stores) {
        ++st.at;
        const auto t0 = Clock::now();
        ops_.run_local(*o, r, step);
        st.seconds[static_cast<std::size_t>(category(o->kind))] += seconds_since(t0);
      }
    }
  }

  void replica_task(std::int64_t r) {
    Device& dev = m_.replica(r);
    const std::int64_t slot = m_.local(r);
    ReplicaIo& st = state_[static_cast<std::size_t>(slot)];
    dev.segment_seconds.fill(0.0);
    auto fail = [&](Position at) {
      st.error = std::current_exception();
      st.error_at = at;
    };
    bool posted = false;
    // The piece in flight must end before the task does: it writes this replica's slots.
    auto finish_piece = [&](std::int64_t s) -> bool {
      if (!posted) return true;
      posted = false;
      try {
        queue_.wait(slot);
      } catch (...) {
        if (!st.error) fail({s + 1, 0, st.at});
        return false;
      }
      return true;
    };
    auto piece_here = [&](std::int64_t s, std::int64_t minor) -> bool {
      try {
        io_piece(r, s);
      } catch (...) {
        fail({s + 1, minor, st.at});
        return false;
      }
      return true;
    };
    if (!piece_here(-1, 0)) return;  // the loads of step 0
    for (std::int64_t s = 0; s < steps_; ++s) {
      if (!finish_piece(s - 1)) return;  // the loads of step s
      queue_.post(slot, piece_job_, s * m_.hosted.n + slot);
      posted = true;
      for (std::size_t k = 0; k < step_.compute.size(); ++k) {
        const Op& op = *step_.compute[k];
        const auto t0 = Clock::now();
        try {
          ops_.run_local(op, r, s);
        } catch (...) {
          fail({s, 1 + static_cast<std::int64_t>(k), 0});
          finish_piece(s);
          return;
        }
        dev.segment_seconds[static_cast<std::size_t>(category(op.kind))] += seconds_since(t0);
      }
    }
    if (!finish_piece(steps_ - 1)) return;
    piece_here(steps_, 1);  // the stores of the last step
  }

  EngineState& m_;
  const OpRunner& ops_;
  IoQueue& queue_;
  const Ops step_;
  std::int64_t steps_;
  std::vector<ReplicaIo> state_;
  // The IO thread's job: piece s of replica r, as one argument.
  std::function<void(std::int64_t)> piece_job_;
};

}  // namespace

IoThread::IoThread(EngineState& state, const OpRunner& ops) : m_(state), ops_(ops) {
  const auto& phases = m_.plan.phases;
  preloads_.assign(phases.size(), {});
  for (std::size_t p = 0; p < phases.size(); ++p)
    for (const Op& op : phases[p].ops)
      if (op.preload && op.kind == OpKind::kRemoteLoad) preloads_[p].push_back(&op);
  preload_job_ = [this](std::int64_t r) {
    Device& dev = m_.replica(r);
    const auto t0 = Clock::now();
    for (const Op* op : preloads_[m_.current_phase]) ops_.run_local(*op, r, 0);
    dev.preload_seconds = seconds_since(t0);
  };
}

IoThread::~IoThread() = default;

IoQueue& IoThread::queue() {
  if (!queue_) queue_ = std::make_unique<IoQueue>(m_.hosted.n);
  return *queue_;
}

void IoThread::begin_phase(std::size_t p) {
  preload_on_thread_ = m_.schedule.phases[p].preload_on_io_thread;
  if (preload_on_thread_) queue();
}

void IoThread::post_preload(std::int64_t r) {
  Device& dev = m_.replica(r);
  if (dev.preload_posted) return;
  queue_->post(m_.local(r), preload_job_, r);
  dev.preload_posted = true;
}

void IoThread::finish_preloads() {
  std::exception_ptr first;
  double slowest = 0.0;
  for (std::int64_t r = m_.hosted.first; r < m_.hosted.first + m_.hosted.n; ++r) {
    Device& dev = m_.replica(r);
    if (!dev.preload_posted) continue;
    dev.preload_posted = false;
    try {
      queue_->wait(m_.local(r));
    } catch (...) {
      if (!first) first = std::current_exception();
    }
    slowest = std::max(slowest, dev.preload_seconds);
  }
  if (slowest > 0.0) m_.add_seconds(OpCategory::kRemote, slowest);
  if (first) std::rethrow_exception(first);
}

void IoThread::run_overlapped(const Op& repeat, planner::SegmentRun run) {
  OverlappedRepeat::Ops step;
  for (const Op& o : repeat.body) {
    if (!planner::is_transfer(o) || m_.tensor(planner::the_tensor(o)).double_buffer < 0)
      step.compute.push_back(&o);
    else if (o.kind == OpKind::kHostLoad || o.kind == OpKind::kRemoteLoad)
      step.loads.push_back(&o);
    else
      step.stores.push_back(&o);
  }
  OverlappedRepeat overlapped(m_, ops_, queue(), std::move(step), repeat.steps);
  finish_preloads();  // a slot holds one piece at a time
  overlapped.run(run);
}

}  // namespace popkit::engine
