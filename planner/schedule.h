// The schedule a plan runs by on a CPU: how the engine (engine/exec/) runs each list of
// ops -- setup, a phase, a repeat's body -- on its replicas' threads, and what the cost
// model (planner/cost.h) prices: the segments of local ops between collectives and
// repeats, the sync chunks execution.sync_pattern cuts them into, where the threads wait
// (runs of the pool, barriers), and what the IO thread moves. schedule() makes it; the
// engine runs what it returns and the estimate prices the same, so they cannot drift.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "planner/plan.h"

namespace popkit::planner {

// io_overlapped and preload: who moves the data the IO thread could.
enum class IoThreadUse {
  kAuto,    // the IO thread when the compute threads leave a core free and the loop moves
            // at least kIoThreadMinBytes a step (preload: the phase's loads), else kInline
  kThread,  // the IO thread; a replica runs its own piece if the thread has not begun it
  kInline,  // each replica's own thread, where io moves it (in the plan's two slots)
};

// kAuto's least: the IO thread needs pieces big enough to pay for the hand-off, and for
// the consuming core reading the data from another core's cache. Measured here
// (bench/README.md), R 1 on one compute thread: at 200 KiB per step the thread lost 2-10%
// to moving the data in place; from 768 KiB it was even or gained up to 5%.
inline constexpr std::uint64_t kIoThreadMinBytes = std::uint64_t{512} << 10;

// What a run has beside its plan.
struct RunThreads {
  std::int64_t replicas = 1;  // hosted by this process: R in one process
  int threads = 1;            // compute threads, the caller's included (compute_threads)
  int cores = 1;              // the machine's
  IoThreadUse io_thread = IoThreadUse::kAuto;
};

// The engine's compute threads: `available` (at least 1), at most one per replica when
// a process hosts several, and 1 with pipeline stages (a worker thread per device).
int compute_threads(int available, std::int64_t replicas, std::int64_t stages);

// A run of transfers, ops [first, io_end) of a segment, and the compute after it,
// [io_end, end): a sync group's devices start a chunk together.
struct SyncChunk {
  std::size_t first = 0, io_end = 0, end = 0;
  [[nodiscard]] bool io() const { return io_end > first; }
  bool operator==(const SyncChunk&) const = default;
};

// How a segment (or an io_overlapped loop on the IO thread) runs on the threads, and
// where they wait.
enum class SegmentRun {
  kInline,    // on the caller, replica after replica: one replica hosted, or one with all
              // the threads (its GEMMs spread over them); no wait
  kPool,      // a task per replica on the pool: one run of the pool, its threads woken
  kLockstep,  // full: one run of the pool whose threads are lanes of fixed replicas,
              // meeting at a barrier after each chunk of each step but the last
  kLadder,    // replica_and_ladder: one run of the pool, a thread per ladder set; a set
              // runs each part of each chunk of each step (its transfers, then its
              // compute) as a run of its own pool of lane_threads, in turn when 1
};

struct OpsSchedule;

// One item of a list of ops as the engine runs it: ops [first, end) of the list.
struct ScheduleItem {
  enum class Kind { kSegment, kCollective, kRepeat };
  Kind kind = Kind::kSegment;
  std::size_t first = 0, end = 0;
  // A segment's run (an io_thread repeat's too), and when its group syncs at its
  // transfers its chunks, positions in the segment: one for kPool (the run of the pool
  // that starts the segment is its only sync), more for kLockstep and kLadder.
  SegmentRun run = SegmentRun::kInline;
  std::vector<SyncChunk> chunks;
  // A repeat: its body for its steps, or with io_thread (io_overlapped) each replica
  // running the whole loop as one task while the IO thread moves its double-buffered
  // stores and loads.
  bool io_thread = false;
  std::vector<OpsSchedule> body;  // a repeat's: one
  bool operator==(const ScheduleItem&) const = default;
};

// A list of ops (setup, a phase, a repeat's body) for its steps.
struct OpsSchedule {
  // Every op local: one segment runs all the steps, each replica straight through.
  // Otherwise step after step, the items in order.
  bool across_steps = false;
  std::vector<ScheduleItem> items;
  bool operator==(const OpsSchedule&) const = default;
};

struct PhaseSchedule {
  OpsSchedule ops;
  // The phase's preload loads (execution.io_schedule: preload), one piece per replica,
  // move on the IO thread while the phase computes; their bytes.
  bool preload_on_io_thread = false;
  std::uint64_t preload_bytes = 0;
  bool operator==(const PhaseSchedule&) const = default;
};

struct Schedule {
  RunThreads run;
  // A pipelined plan: a worker thread per (replica, stage) runs its stage's phase op by
  // op (planner/sync_groups.h PipelineCycles); setup and phases hold no items.
  bool stage_workers = false;
  // One replica with several threads: its large GEMMs' column blocks or row tiles
  // (planner/workspace.h column_blocks, gemm_tiles) and its element-wise passes' blocks
  // (planner/element_blocks.h) run on the pool.
  bool spread_gemms = false;
  int lane_threads = 1;  // replica_and_ladder: each ladder set's pool
  OpsSchedule setup;
  std::vector<PhaseSchedule> phases;
};

// A local op, one that a segment runs: every op but collectives and repeats.
bool is_local(const Op& op);
// A host or remote transfer: the sync points of execution.sync_pattern.
bool is_transfer(const Op& op);

[[nodiscard]] Schedule schedule(const Plan& plan, const RunThreads& run);

}  // namespace popkit::planner
