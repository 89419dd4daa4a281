// Segments, sync chunks and repeats on the replicas' pool (segments.h).
#include "engine/exec/segments.h"

#include <algorithm>
#include <atomic>
#include <barrier>

namespace popkit::engine {

using planner::Op;
using planner::OpKind;

using planner::ScheduleItem;
using planner::SegmentRun;

// The ops for steps [s0, s1): one segment across the steps, or step after step the
// schedule's segments, collectives and repeats. The memory account changes only at
// alloc and free, so sampling after those is sampling after every op.
// Over several processes the ranks agree whether to stop before each collective and
// before the segment that updates first (EngineState::agree_on_stop).
void Segments::run_list(const std::vector<Op>& ops, const planner::OpsSchedule& schedule,
                        std::int64_t s0, std::int64_t s1, bool sample) {
  auto segment = [&](const ScheduleItem& item, std::int64_t from, std::int64_t to) {
    const auto items = std::span(ops).subspan(item.first, item.end - item.first);
    if (std::any_of(items.begin(), items.end(),
                    [](const Op& op) { return op.kind == OpKind::kOptimizerStep; }))
      m_.agree_on_stop(/*before_update=*/true);
    run_segment(items, item, from, to, sample);
  };
  if (schedule.across_steps) {
    for (const ScheduleItem& item : schedule.items) segment(item, s0, s1);
    return;
  }
  for (std::int64_t s = s0; s < s1; ++s)
    for (const ScheduleItem& item : schedule.items) {
      const Op& op = ops[item.first];
      switch (item.kind) {
        case ScheduleItem::Kind::kSegment:
          segment(item, s, s + 1);
          break;
        case ScheduleItem::Kind::kCollective: {
          m_.agree_on_stop();
          const auto t0 = Clock::now();
          ops_.run_collective(op, s);
          m_.add_seconds(category(op.kind), seconds_since(t0));
          break;
        }
        case ScheduleItem::Kind::kRepeat:
          if (item.io_thread)
            io_.run_overlapped(op, item.run);
          else
            run_list(op.body, item.body.front(), 0, op.steps, false);
          break;
      }
    }
}

// A segment: `ops` (all local) for the repeat steps [s0, s1), step after step, each
// replica running the whole segment as one task, so the pool synchronises once per
// segment, not once per op. The outcome is the same as running op after op on all
// replicas: replicas share nothing between collectives, and when ops fail the one
// reported is the earliest (step, op), then the lowest replica, as bulk-synchronous
// execution would report it. Time per category: the slowest replica's.
// Allocs and frees run in the segment too (each replica has its own account), each
// followed by the replica's memory sample when `sample` is set.
void Segments::run_segment(std::span<const Op> ops, const ScheduleItem& item, std::int64_t s0,
                           std::int64_t s1, bool sample) {
  if (item.run == SegmentRun::kLockstep || item.run == SegmentRun::kLadder) {
    run_synced(ops, item, s0, s1, sample);
    return;
  }
  m_.on_every_replica(item.run, [&](std::int64_t r) {
    Device& dev = m_.replica(r);
    dev.segment_seconds.fill(0.0);
    dev.error = nullptr;
    std::size_t at = 0;
    for (std::int64_t s = s0; s < s1; ++s)
      for (const Op& op : ops)
        if (!run_at(op, r, s, at++, sample)) return;
  });
  m_.add_slowest_segment_seconds();
  m_.rethrow_earliest_failure();
}

// One op of a segment on replica r at step s, `at` its position in the segment
// (step-major, then op). False when it failed: the replica's error and its position
// are set.
bool Segments::run_at(const Op& op, std::int64_t r, std::int64_t s, std::size_t at, bool sample) {
  Device& dev = m_.replica(r);
  if (io_.takes(op)) {
    // Waited for at the phase's end (IoThread::finish_preloads).
    io_.post_preload(r);
    return true;
  }
  const auto t0 = Clock::now();
  try {
    ops_.run_local(op, r, s);
  } catch (...) {
    dev.error = std::current_exception();
    dev.error_at = at;
    return false;
  }
  if (sample && (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree))
    dev.sampler.sample(dev.account);
  dev.segment_seconds[static_cast<std::size_t>(category(op.kind))] += seconds_since(t0);
  return true;
}

// ---- sync patterns (execution.sync_pattern; planner/sync_groups.h) ------------------
// Host and remote transfers are the sync points: at each run of them a device waits for
// the others of its GS2 group. The schedule cuts the segment's ops into chunks
// (planner/schedule.h SyncChunk), each a run of transfers and the compute after it, and
// the members of a group start each chunk together: no device begins a run of transfers
// before its group finished what came before.
//  - full: one group, every device: every replica waits for every other at each IO
//    (the pool's threads as lanes of fixed replicas, meeting at a barrier per chunk).
//  - replica_and_ladder: the even and the odd devices, two ladder sets, each in
//    lockstep within itself, that never wait for each other at IO (Poplar: "an IPU
//    group communicates with the host without synchronisation between groups"), which
//    lets one set move data while the other computes. With R = 2 each set is one
//    device, as under single_pipeline: GS2 is the same. There is no host link to take
//    in turns on a CPU: a lock that made the sets take turns cost the phased example
//    10 % and modelled nothing Poplar does.
//  - single_pipeline: no chunks: each device does its IO without waiting.
// A pattern changes when a replica waits, never what it computes: replicas share
// nothing between collectives. Within a process: ranks meet at the collectives.

namespace {

// One segment's chunks, step after step (item i is chunk i % n of step s0 + i / n), run
// by lanes of replicas. A failure stops a lane; another goes on up to the item that
// failed, so that the earliest failure is the one reported, as in bulk-synchronous
// execution.
class SyncedSegment {
 public:
  using Chunk = planner::SyncChunk;
  // run_at(op, r, s, at): one op of the segment, false when it failed (Segments::run_at).
  using RunAt = std::function<bool(const Op&, std::int64_t, std::int64_t, std::size_t)>;

  SyncedSegment(std::span<const Op> ops, const std::vector<Chunk>& chunks, std::int64_t s0,
                std::int64_t s1, RunAt run_at)
      : ops_(ops),
        chunks_(chunks),
        s0_(s0),
        n_(static_cast<std::int64_t>(chunks.size())),
        items_((s1 - s0) * n_),
        failed_item_(items_),
        run_at_(std::move(run_at)) {}

  // One lane: its members' chunk of each item, on `on` (a pool, or one after another
  // when null); with `meet`, meeting the other lanes after each item (full). A lane that
  // stops drops out of `meet`. Every member runs a part even when another failed in it,
  // so that the earliest failure is the one reported. `count`: this lane counts the
  // runs of transfers that its group started together.
  void run_lane(const std::vector<std::int64_t>& members, ThreadPool* on, std::barrier<>* meet,
                bool count) {
    const auto m = static_cast<std::int64_t>(members.size());
    for (std::int64_t item = 0; item < items_; ++item) {
      if (item > failed_item_.load()) break;
      const Chunk& c = chunks_[static_cast<std::size_t>(item % n_)];
      std::atomic<bool> ok{true};
      auto part = [&](std::size_t first, std::size_t end) {
        auto member = [&](std::int64_t i) {
          if (!run_ops(members[static_cast<std::size_t>(i)], item, first, end)) ok = false;
        };
        if (on != nullptr) {
          on->run(m, member);
        } else {
          for (std::int64_t i = 0; i < m; ++i) member(i);
        }
      };
      if (c.io()) {
        part(c.first, c.io_end);
        if (count) io_syncs_.fetch_add(1);
      }
      if (ok) part(c.io_end, c.end);
      if (!ok) {
        note_failure(item);
        break;
      }
      if (meet != nullptr && item + 1 < items_) meet->arrive_and_wait();
    }
    if (meet != nullptr) meet->arrive_and_drop();
  }

  [[nodiscard]] std::int64_t io_syncs() const { return io_syncs_.load(); }

 private:
  // Replica r's ops [first, end) of item i's chunk; false when one failed.
  bool run_ops(std::int64_t r, std::int64_t item, std::size_t first, std::size_t end) {
    const std::int64_t s = s0_ + item / n_;
    for (std::size_t k = first; k < end; ++k)
      if (!run_at_(ops_[k], r, s, static_cast<std::size_t>(s - s0_) * ops_.size() + k))
        return false;
    return true;
  }

  void note_failure(std::int64_t item) {
    std::int64_t seen = failed_item_.load();
    while (item < seen && !failed_item_.compare_exchange_weak(seen, item)) {
    }
  }

  std::span<const Op> ops_;
  const std::vector<Chunk>& chunks_;
  std::int64_t s0_, n_, items_;
  std::atomic<std::int64_t> failed_item_;
  std::atomic<std::int64_t> io_syncs_{0};  // counted by the lanes' threads
  RunAt run_at_;
};

}  // namespace

void Segments::run_synced(std::span<const Op> ops, const ScheduleItem& item, std::int64_t s0,
                          std::int64_t s1, bool sample) {
  for (auto& dev : m_.devices) {
    dev->error = nullptr;
    dev->segment_seconds.fill(0.0);
  }
  SyncedSegment segment(ops, item.chunks, s0, s1,
                        [&](const Op& op, std::int64_t r, std::int64_t s, std::size_t at) {
                          return run_at(op, r, s, at, sample);
                        });
  std::vector<std::int64_t> all;
  for (std::int64_t r = m_.hosted.first; r < m_.hosted.first + m_.hosted.n; ++r) all.push_back(r);
  ThreadPool& pool = *m_.pool;
  if (item.run == SegmentRun::kLockstep) {
    // A lane per pool thread, each running the same replicas at every item, so that a
    // replica's memory stays in the cache of the core that ran it last (a run of the
    // pool per item would hand the replicas to whichever thread came first).
    const auto lanes = std::min<std::int64_t>(pool.size(), m_.hosted.n);
    std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(lanes));
    for (std::size_t i = 0; i < all.size(); ++i)
      members[i % static_cast<std::size_t>(lanes)].push_back(all[i]);
    std::barrier<> meet(lanes);
    pool.run(lanes, [&](std::int64_t l) {
      segment.run_lane(members[static_cast<std::size_t>(l)], nullptr, &meet, l == 0);
    });
  } else {
    // Replica r is device r (one stage): its ladder set is r % 2, as in GS2. Each set
    // runs on a thread of the pool with half the pool's threads for its members.
    std::array<std::vector<std::int64_t>, 2> sets;
    for (const std::int64_t r : all) sets[static_cast<std::size_t>(r % 2)].push_back(r);
    const int per_set = m_.schedule.lane_threads;
    for (auto& lane : lane_pools_)
      if (per_set > 1 && (!lane || lane->size() != per_set))
        lane = std::make_unique<ThreadPool>(per_set);
    pool.run(2, [&](std::int64_t l) {
      const auto i = static_cast<std::size_t>(l);
      segment.run_lane(sets[i], per_set > 1 ? lane_pools_[i].get() : nullptr, nullptr, true);
    });
  }
  m_.timings.io_syncs += segment.io_syncs();
  m_.add_slowest_segment_seconds();
  m_.rethrow_earliest_failure();
}

}  // namespace popkit::engine
