// The stage workers of a pipelined plan (pipeline_run.h).
#include "engine/exec/pipeline_run.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "engine/runtime/float_mode.h"

namespace popkit::engine {

using planner::Op;
using planner::OpKind;

// A receive buffer's hand-over between two stage workers of one replica, one per ordered
// pair of stages (a tied weight goes from the first stage to the last, its gradient
// back, past the stages between), so each carries one sender's transfers in the order
// both programs hold them. The sender
// waits until the receiver has taken the previous contents, copies into the buffer and
// marks it full; the receiver waits until it is full, copies out and marks it empty. The
// copies happen under the lock, so the data is ordered with the flag. `abort_` ends
// every wait when a worker failed.
struct StagePipeline::Mailbox {
  std::mutex mutex;
  std::condition_variable changed;
  bool full = false;
};

// The stage workers of one stage meet here around a collective (all replicas' buffers of
// that stage, run by one of them); abortable like the mailboxes.
class StagePipeline::StageBarrier {
 public:
  explicit StageBarrier(std::int64_t n) : n_(n) {}
  // False when aborted.
  bool arrive_and_wait(const std::atomic<bool>& abort) {
    std::unique_lock lock(mutex_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return !abort.load();
    }
    changed_.wait(lock, [&] { return generation_ != generation || abort.load(); });
    return generation_ != generation;
  }
  void wake() {
    std::lock_guard lock(mutex_);
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t n_;
  std::int64_t arrived_ = 0;
  std::uint64_t generation_ = 0;
};

// A worker's time in its slots not waiting for a neighbour, and the slots' first start
// and last end.
struct StagePipeline::StageRun {
  double busy = 0.0;
  Clock::time_point first, last;
};

namespace {

// Thrown by a worker that stops because another failed: not a failure of its own.
struct StoppedByAnother {};
[[noreturn]] void aborted() {
  throw StoppedByAnother{};
}

}  // namespace

StagePipeline::StagePipeline(EngineState& state, const OpRunner& ops) : m_(state), ops_(ops) {
  for (std::size_t i = 0; i < m_.devices.size() * static_cast<std::size_t>(m_.n_stages); ++i)
    mailboxes_.push_back(std::make_unique<Mailbox>());
  for (std::int64_t s = 0; s < m_.n_stages; ++s)
    stage_barriers_.push_back(std::make_unique<StageBarrier>(m_.hosted.n));
  if (m_.plan.sync_pattern != config::SyncPattern::kSinglePipeline) {
    cycles_ = planner::pipeline_cycles(m_.plan);
    for (const auto& meeting : cycles_->meetings)
      cycle_barriers_.push_back(
          std::make_unique<StageBarrier>(static_cast<std::int64_t>(meeting.devices.size())));
  }
}

StagePipeline::~StagePipeline() = default;

StagePipeline::Mailbox& StagePipeline::mailbox(std::int64_t r, std::int64_t to,
                                               std::int64_t from) const {
  const std::int64_t i = (m_.local(r) * m_.n_stages + to) * m_.n_stages + from;
  return *mailboxes_[static_cast<std::size_t>(i)];
}

void StagePipeline::abort_workers() {
  abort_.store(true);
  for (auto& m : mailboxes_) {
    std::lock_guard lock(m->mutex);
    m->changed.notify_all();
  }
  for (auto& b : stage_barriers_) b->wake();
  for (auto& b : cycle_barriers_) b->wake();
}

// A send: into stage `peer`'s receive buffer once the receiver took the last contents.
void StagePipeline::send(const Op& op, std::int64_t r, std::int64_t stage) {
  Mailbox& m = mailbox(r, op.peer, stage);
  const int src = op.inputs[0], dst = op.outputs[0];
  std::unique_lock lock(m.mutex);
  m.changed.wait(lock, [&] { return !m.full || abort_.load(); });
  if (abort_.load()) aborted();
  std::memcpy(ops_.raw(m_.device(r, op.peer), dst, 0, op),
              ops_.raw(m_.device(r, stage), src, 0, op), m_.tensor(src).nbytes);
  m.full = true;
  m.changed.notify_all();
}

void StagePipeline::receive(const Op& op, std::int64_t r, std::int64_t stage) {
  Mailbox& m = mailbox(r, stage, op.peer);
  const int src = op.inputs[0], dst = op.outputs[0];
  Device& dev = m_.device(r, stage);
  std::unique_lock lock(m.mutex);
  m.changed.wait(lock, [&] { return m.full || abort_.load(); });
  if (abort_.load()) aborted();
  if (dst != src)  // else read in place
    std::memcpy(ops_.raw(dev, dst, 0, op), ops_.raw(dev, src, 0, op), m_.tensor(src).nbytes);
  m.full = false;
  m.changed.notify_all();
}

// Worker (r, stage): the stage's program on its device. Ops in a slot see the slot's
// micro-batch as their step; collectives meet the same stage of the other replicas.
StagePipeline::StageRun StagePipeline::run_stage(std::size_t p, std::int64_t r) {
  const planner::Phase& ph = m_.plan.phases[p];
  const std::int64_t stage = ph.stage;
  Device& dev = m_.device(r, stage);
  dev.segment_seconds.fill(0.0);
  dev.sampler.begin(dev.account);
  StageRun run;
  // The sync pattern's meetings (planner/sync_groups.h, PipelineCycles): before a slot,
  // every meeting of the device's group up to the slot's cycle; after the last slot
  // (the flush), the rest.
  const std::int64_t device_id = r * m_.n_stages + stage;
  const std::int64_t group = cycles_ ? cycles_->group_of[static_cast<std::size_t>(device_id)] : -1;
  std::size_t met = 0;
  auto meet_until = [&](std::int64_t cycle) {
    if (group < 0) return;
    const auto g = static_cast<std::size_t>(group);
    const auto& meeting = cycles_->meetings[g];
    for (; met < meeting.cycles.size() && meeting.cycles[met] <= cycle; ++met) {
      if (!cycle_barriers_[g]->arrive_and_wait(abort_)) aborted();
      if (device_id == meeting.devices.front()) cycle_meetings_.fetch_add(1);
    }
  };
  const std::int64_t slots_end = ph.slots.empty() ? 0 : ph.slots.back().end_op;
  std::size_t slot = 0;
  for (std::size_t i = 0; i < ph.ops.size(); ++i) {
    if (abort_.load()) aborted();
    const Op& op = ph.ops[i];
    const auto at = static_cast<std::int64_t>(i);
    while (slot < ph.slots.size() && at >= ph.slots[slot].end_op) ++slot;
    const bool in_slot = slot < ph.slots.size() && at >= ph.slots[slot].first_op;
    const std::int64_t mb = in_slot ? ph.slots[slot].micro_batch : 0;
    if (in_slot && at == ph.slots[slot].first_op && cycles_)
      meet_until(cycles_->slot_cycle[p][slot]);
    if (at == slots_end && cycles_) meet_until(cycles_->cycles);
    const auto t0 = Clock::now();
    if (in_slot && at == ph.slots.front().first_op) run.first = t0;
    if (is_collective(op.kind)) {
      StageBarrier& barrier = *stage_barriers_[static_cast<std::size_t>(stage)];
      if (!barrier.arrive_and_wait(abort_)) aborted();
      if (r == m_.hosted.first) ops_.run_collective(op, mb);
      if (!barrier.arrive_and_wait(abort_)) aborted();
    } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
      // run_on and run_collective ask themselves; a pipeline runs in one process.
      (void)m_.gate.before(op.kind, m_.steps_done + 1, /*may_skip=*/false);
      if (op.kind == OpKind::kSend)
        send(op, r, stage);
      else
        receive(op, r, stage);
    } else {
      ops_.run_on(dev, op, r, mb);
      if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) dev.sampler.sample(dev.account);
    }
    const double t = seconds_since(t0);
    dev.segment_seconds[static_cast<std::size_t>(category(op.kind))] += t;
    if (in_slot) {
      // A transfer's time is mostly its wait for the neighbour: idle, not work.
      if (op.kind != OpKind::kRecv && op.kind != OpKind::kSend) run.busy += t;
      run.last = Clock::now();
    }
  }
  if (cycles_) meet_until(cycles_->cycles);  // when the slots end the program
  return run;
}

// A worker per (replica, stage), all at once.
void StagePipeline::run_step(const BatchSource& source) {
  const auto t_step = Clock::now();
  m_.batches = &source;
  m_.where = "pipelined step";
  const auto S = static_cast<std::size_t>(m_.n_stages);
  const auto n_phases = m_.plan.phases.size();
  m_.timings.phase_seconds.resize(n_phases, 0.0);
  m_.timings.phase_category_seconds.resize(n_phases);
  m_.phase_memory.resize(n_phases,
                         std::vector<planner::PhaseMemory>(static_cast<std::size_t>(m_.hosted.n)));
  for (auto& m : mailboxes_) m->full = false;
  abort_.store(false);
  cycle_meetings_.store(0);
  const std::size_t n_workers = static_cast<std::size_t>(m_.hosted.n) * S;
  std::vector<StageRun> runs(n_workers);
  std::vector<std::exception_ptr> errors(n_workers);
  std::vector<std::thread> workers;
  workers.reserve(n_workers);
  for (std::int64_t r = m_.hosted.first; r < m_.hosted.first + m_.hosted.n; ++r)
    for (std::size_t p = 0; p < n_phases; ++p) {
      const std::size_t w = static_cast<std::size_t>(m_.local(r)) * S + p;
      workers.emplace_back([this, &runs, &errors, w, r, p] {
        const FlushDenormals mode;  // every engine thread computes in the same mode
        try {
          runs[w] = run_stage(p, r);
        } catch (const StoppedByAnother&) {  // the failure is the other worker's
        } catch (...) {
          errors[w] = std::current_exception();
          abort_workers();
        }
      });
    }
  for (auto& t : workers) t.join();
  m_.batches = nullptr;
  // The first failure in replica then stage order.
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  record_step(runs, seconds_since(t_step));
}

// Per phase, the slowest device's time (and per category); the largest memory sample;
// the step's bubble: 1 - the stages' busy time / (devices x the slots' span).
void StagePipeline::record_step(const std::vector<StageRun>& runs, double step_seconds) {
  const auto S = static_cast<std::size_t>(m_.n_stages);
  Timings& timings = m_.timings;
  Clock::time_point begin = runs.front().first, end = runs.front().last;
  double busy = 0.0;
  for (std::size_t p = 0; p < m_.plan.phases.size(); ++p) {
    double slowest = 0.0;
    std::array<double, kNumOpCategories> by_category{};
    for (std::int64_t r = m_.hosted.first; r < m_.hosted.first + m_.hosted.n; ++r) {
      const std::size_t w = static_cast<std::size_t>(m_.local(r)) * S + p;
      const Device& dev = m_.device(r, m_.plan.phases[p].stage);
      double total = 0.0;
      for (std::size_t c = 0; c < kNumOpCategories; ++c) {
        by_category[c] = std::max(by_category[c], dev.segment_seconds[c]);
        total += dev.segment_seconds[c];
      }
      slowest = std::max(slowest, total);
      const auto& m = dev.sampler.memory();
      auto& kept = m_.phase_memory[p][static_cast<std::size_t>(m_.local(r))];
      if (m.peak > kept.peak || timings.steps == 0) kept = m;
      begin = std::min(begin, runs[w].first);
      end = std::max(end, runs[w].last);
      busy += runs[w].busy;
    }
    timings.phase_seconds[p] += slowest;
    for (std::size_t c = 0; c < kNumOpCategories; ++c) {
      timings.phase_category_seconds[p][c] += by_category[c];
      timings.category_seconds[c] += by_category[c];
    }
  }
  const double span = std::chrono::duration<double>(end - begin).count();
  const double devices = static_cast<double>(runs.size());
  timings.pipeline_bubble.push_back(span > 0 ? std::max(0.0, 1.0 - busy / (devices * span)) : 0.0);
  timings.io_syncs += cycle_meetings_.load();
  ++timings.steps;
  timings.step_seconds.push_back(step_seconds);
}

}  // namespace popkit::engine
