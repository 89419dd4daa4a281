// The schedule of a plan on the engine's threads (schedule.h).
#include "planner/schedule.h"

#include <algorithm>

#include "planner/operands.h"

namespace popkit::planner {
namespace {

bool is_collective(OpKind k) {
  return k == OpKind::kAllGather || k == OpKind::kReduceScatter || k == OpKind::kAllReduce ||
         k == OpKind::kSliceShard;
}

class Scheduler {
 public:
  Scheduler(const Plan& plan, const RunThreads& run) : plan_(plan), run_(run) {
    // task(r) per replica: on the caller when one replica is hosted (whose GEMMs may use
    // the threads), else on the pool.
    replica_run_ = run.replicas > 1 ? SegmentRun::kPool : SegmentRun::kInline;
    // A group of one device waits for no one: the largest group hosted here, all of them
    // (full), a ladder set (every other replica), or one (single_pipeline).
    const std::int64_t largest_group =
        plan.sync_pattern == config::SyncPattern::kFull               ? run.replicas
        : plan.sync_pattern == config::SyncPattern::kReplicaAndLadder ? (run.replicas + 1) / 2
                                                                      : 1;
    syncs_ = largest_group > 1;
    synced_run_ = plan.sync_pattern == config::SyncPattern::kFull ? SegmentRun::kLockstep
                                                                  : SegmentRun::kLadder;
  }

  OpsSchedule list(const std::vector<Op>& ops) const {
    OpsSchedule s;
    if (std::all_of(ops.begin(), ops.end(), is_local)) {
      s.across_steps = true;
      if (!ops.empty()) s.items.push_back(segment(ops, 0, ops.size()));
      return s;
    }
    std::size_t first = 0;  // of the segment being gathered
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (is_local(ops[i])) continue;
      if (i > first) s.items.push_back(segment(ops, first, i));
      first = i + 1;
      if (ops[i].kind == OpKind::kRepeat) {
        s.items.push_back(repeat(ops[i], i));
      } else {
        ScheduleItem c;
        c.kind = ScheduleItem::Kind::kCollective;
        c.first = i;
        c.end = i + 1;
        s.items.push_back(std::move(c));
      }
    }
    if (ops.size() > first) s.items.push_back(segment(ops, first, ops.size()));
    return s;
  }

  // Whether the IO thread takes `bytes` a step (or a phase's preloads).
  bool use_io_thread(std::uint64_t bytes) const {
    switch (run_.io_thread) {
      case IoThreadUse::kThread:
        return true;
      case IoThreadUse::kInline:
        return false;
      case IoThreadUse::kAuto:
        break;
    }
    return run_.cores > run_.threads && bytes >= kIoThreadMinBytes;
  }

 private:
  ScheduleItem segment(const std::vector<Op>& ops, std::size_t first, std::size_t end) const {
    ScheduleItem s;
    s.first = first;
    s.end = end;
    s.run = replica_run_;
    const bool transfers = std::any_of(ops.begin() + static_cast<std::ptrdiff_t>(first),
                                       ops.begin() + static_cast<std::ptrdiff_t>(end), is_transfer);
    if (!syncs_ || !transfers) return s;
    // One chunk: the run of the pool that starts the segment is its only sync.
    s.chunks = sync_chunks(ops, first, end);
    if (s.chunks.size() > 1) s.run = synced_run_;
    return s;
  }

  // A chunk starts at each transfer that follows compute; allocs and frees are
  // bookkeeping, no program step, and join the part they are in, so that the loads of a
  // step (images, labels, each after its alloc) are one run of transfers.
  static std::vector<SyncChunk> sync_chunks(const std::vector<Op>& ops, std::size_t first,
                                            std::size_t end) {
    constexpr std::size_t kNoCompute = ~std::size_t{0};
    std::vector<SyncChunk> chunks;
    for (std::size_t i = 0; i < end - first; ++i) {
      const Op& op = ops[first + i];
      const bool bookkeeping = op.kind == OpKind::kAlloc || op.kind == OpKind::kFree;
      const bool transfer = is_transfer(op);
      const bool computed = !chunks.empty() && chunks.back().io_end != kNoCompute;
      if (chunks.empty() || (transfer && computed)) chunks.push_back({i, kNoCompute, i});
      if (!bookkeeping && !transfer && chunks.back().io_end == kNoCompute) chunks.back().io_end = i;
      chunks.back().end = i + 1;
    }
    for (SyncChunk& c : chunks)
      if (c.io_end == kNoCompute) c.io_end = c.end;
    return chunks;
  }

  // io_overlapped with the IO thread: the transfers of double-buffered tensors leave the
  // step; the loop takes the thread when they move enough and no collective makes every
  // step bulk-synchronous. Without it the loop runs as io runs it, each step in its own
  // slots: on a machine with no core free, a thread that moves the data could only
  // preempt a replica, and moving it later than io does costs cache misses.
  ScheduleItem repeat(const Op& op, std::size_t i) const {
    ScheduleItem r;
    r.kind = ScheduleItem::Kind::kRepeat;
    r.first = i;
    r.end = i + 1;
    if (op.io_mode == IoMode::kIoOverlapped) {
      std::uint64_t bytes_per_step = 0;
      bool local = true;
      for (const Op& o : op.body) {
        if (is_transfer(o) &&
            plan_.tensors[static_cast<std::size_t>(the_tensor(o))].double_buffer >= 0)
          bytes_per_step += plan_.tensors[static_cast<std::size_t>(the_tensor(o))].nbytes;
        else
          local = local && is_local(o);
      }
      if (local && use_io_thread(bytes_per_step)) {
        r.io_thread = true;
        r.run = replica_run_;
        return r;
      }
    }
    r.body.push_back(list(op.body));
    return r;
  }

  const Plan& plan_;
  RunThreads run_;
  SegmentRun replica_run_ = SegmentRun::kInline;
  SegmentRun synced_run_ = SegmentRun::kLockstep;
  bool syncs_ = false;
};

}  // namespace

int compute_threads(int available, std::int64_t replicas, std::int64_t stages) {
  int threads = std::max(1, available);
  if (replicas > 1) threads = static_cast<int>(std::min<std::int64_t>(threads, replicas));
  if (stages > 1) threads = 1;
  return threads;
}

bool is_local(const Op& op) {
  return op.kind != OpKind::kRepeat && !is_collective(op.kind);
}

bool is_transfer(const Op& op) {
  return op.kind == OpKind::kHostLoad || op.kind == OpKind::kHostStore ||
         op.kind == OpKind::kRemoteLoad || op.kind == OpKind::kRemoteStore;
}

Schedule schedule(const Plan& plan, const RunThreads& run) {
  Schedule s;
  s.run = run;
  s.stage_workers = plan.pipeline && plan.pipeline->stages.size() > 1;
  s.spread_gemms = run.replicas == 1 && run.threads > 1;
  if (plan.sync_pattern == config::SyncPattern::kReplicaAndLadder)
    s.lane_threads = std::max(1, run.threads / 2);
  if (s.stage_workers) return s;
  const Scheduler scheduler(plan, run);
  s.setup = scheduler.list(plan.setup);
  s.phases.reserve(plan.phases.size());
  for (const Phase& ph : plan.phases) {
    PhaseSchedule p;
    p.ops = scheduler.list(ph.ops);
    bool preloads = false;
    for (const Op& op : ph.ops)
      if (op.preload && op.kind == OpKind::kRemoteLoad) {
        preloads = true;
        p.preload_bytes += plan.tensors[static_cast<std::size_t>(the_tensor(op))].nbytes;
      }
    p.preload_on_io_thread = preloads && scheduler.use_io_thread(p.preload_bytes);
    s.phases.push_back(std::move(p));
  }
  return s;
}

}  // namespace popkit::planner
