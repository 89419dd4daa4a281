// Running a list of ops (setup, or a phase) bulk-synchronously on the replicas this
// process hosts: runs of local ops between collectives and repeats are segments, each
// replica running a whole segment as one task on the pool, so the pool synchronises once
// per segment and not once per op; execution.sync_pattern cuts a segment with host or
// remote transfers into chunks that a group's devices start together; a repeat runs its
// body for its steps (io_overlapped's with the IO thread where it takes it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/exec/io_thread.h"
#include "engine/exec/op_runner.h"
#include "engine/exec/state.h"

namespace popkit::engine {

class Segments {
 public:
  Segments(EngineState& state, const OpRunner& ops, IoThread& io) : m_(state), ops_(ops), io_(io) {}

  // `ops` once; with `sample`, each device's memory is sampled after every alloc and free.
  void run_ops(const std::vector<planner::Op>& ops, bool sample) { run_body(ops, 0, 1, sample); }

  // A run of transfers, ops [first, io_end), and the compute after it, [io_end, end).
  struct Chunk {
    std::size_t first = 0, io_end = 0, end = 0;
    [[nodiscard]] bool io() const { return io_end > first; }
  };

 private:
  void run_body(const std::vector<planner::Op>& body, std::int64_t s0, std::int64_t s1,
                bool sample);
  void run_repeat(const planner::Op& op);
  void run_segment(const std::vector<const planner::Op*>& ops, std::int64_t s0, std::int64_t s1,
                   bool sample);
  bool run_at(const planner::Op& op, std::int64_t r, std::int64_t s, std::size_t at, bool sample);
  [[nodiscard]] std::vector<Chunk> sync_chunks(const std::vector<const planner::Op*>& ops) const;
  void run_synced(const std::vector<const planner::Op*>& ops, const std::vector<Chunk>& chunks,
                  std::int64_t s0, std::int64_t s1, bool sample);

  EngineState& m_;
  const OpRunner& ops_;
  IoThread& io_;
  // replica_and_ladder: each ladder set's pool when a set has more than one thread.
  std::array<std::unique_ptr<ThreadPool>, 2> lane_pools_;
};

}  // namespace popkit::engine
