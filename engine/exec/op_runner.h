// Running one op of a program: on one device of one replica at one repeat step (memory,
// host and remote IO, the layer kinds' kernels, the loss, the optimizer's step), or a
// collective across the replicas this process hosts. What runs the ops in order, and on
// which threads, is the segments' (segments.h), the IO thread's (io_thread.h) and the
// pipelined stages' (pipeline_run.h) business.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/exec/state.h"
#include "planner/plan.h"
#include "planner/workspace.h"

namespace popkit::engine {

class OpRunner {
 public:
  explicit OpRunner(EngineState& state) : m_(state) {}

  // The op on device `dev` of replica r, at repeat step (or micro-batch) s.
  void run_on(Device& dev, const planner::Op& op, std::int64_t r, std::int64_t s) const;
  // The op on replica r of a plan without stages.
  void run_local(const planner::Op& op, std::int64_t r, std::int64_t s) const {
    run_on(m_.replica(r), op, r, s);
  }
  // A collective across every replica (the caller drives it; its chunks use the pool).
  void run_collective(const planner::Op& op, std::int64_t s) const;

  // Tensor t of `dev` at step s (its second slot at odd steps when io_overlapped double
  // buffers it); an error naming `op` when it is not allocated.
  [[nodiscard]] std::byte* raw(Device& dev, int t, std::int64_t s, const planner::Op& op) const;
  [[nodiscard]] float* f32(Device& dev, int t, std::int64_t s, const planner::Op& op) const {
    return reinterpret_cast<float*>(raw(dev, t, s, op));
  }

  // fn(j0, j1) over the columns [0, n_cols), on the pool when one replica has the
  // threads (engine/layer_kinds.h OpRun::in_column_blocks).
  void in_column_blocks(std::int64_t rows_x_inner, std::int64_t n_cols,
                        const std::function<void(std::int64_t, std::int64_t)>& fn) const;
  // fn(tile) over the tiles of planner::gemm_tiles, likewise.
  void in_gemm_tiles(std::int64_t rows, std::int64_t inner, std::int64_t n_cols,
                     const std::function<void(const planner::GemmTile&)>& fn) const;
  // fn(i0, i1) over the element blocks of [0, n) (planner/element_blocks.h), likewise.
  void in_element_blocks(std::int64_t n,
                         const std::function<void(std::int64_t, std::int64_t)>& fn) const;

 private:
  void on_pool(std::int64_t blocks, std::int64_t tasks,
               const std::function<void(std::int64_t)>& block) const;
  void allocate(Device& dev, const planner::Op& op) const;
  void release(Device& dev, const planner::Op& op) const;
  void remote_copy(Device& dev, const planner::Op& op, std::int64_t s) const;
  void host_load(const planner::Op& op, Device& dev, std::int64_t r, std::int64_t s) const;
  void host_store(const planner::Op& op, Device& dev, std::int64_t s) const;
  void loss(const planner::Op& op, Device& dev, std::int64_t r, std::int64_t s) const;
  void optimizer_step(const planner::Op& op, Device& dev, std::int64_t r, std::int64_t s) const;
  [[nodiscard]] std::int64_t entry_of(const planner::Op& op, std::int64_t s) const;
  [[nodiscard]] std::vector<ReplicaBuffer> buffers_of(int t, std::int64_t s,
                                                      const planner::Op& op) const;
  [[nodiscard]] Collectives* collectives_of(const planner::Op& op) const;

  EngineState& m_;
};

}  // namespace popkit::engine
