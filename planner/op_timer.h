// An op's estimated time on a device profile (cost.h estimate_time describes the model):
// compute, transfers, collectives, and on a CPU the engine's waits around them as the
// plan's schedule (planner/schedule.h) has it. The estimate sums these per phase.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/collective_traffic.h"
#include "planner/device_profile.h"
#include "planner/layer_kinds.h"
#include "planner/plan.h"
#include "planner/schedule.h"

namespace popkit::planner {

// An op's time, in two parts: `transfer`, the bytes of host and remote streams over their
// links, which io_overlapped can hide behind compute; and `serial`, everything else
// (compute, collectives, the overheads and latencies of every op), which it cannot.
struct Seconds {
  double serial = 0.0;
  double transfer = 0.0;
  [[nodiscard]] double total() const { return serial + transfer; }
};

class Timer {
 public:
  // `schedule`: the plan's on the profile's CPU threads (a device profile's waits are 0).
  Timer(const Plan& plan, const DeviceProfile& p, double compute_fraction, TrafficCount* traffic,
        const Schedule& schedule);

  // An op's time on a thread that cycles through `working_set` bytes (working_set()).
  // `accumulating`: the fraction of the op's runs that fold a gradient into the running
  // mean of its accumulators (a repeat's steps after the first). `item`: a repeat's in
  // the schedule.
  [[nodiscard]] Seconds time(const Op& op, double working_set, double accumulating = 0.0,
                             const ScheduleItem* item = nullptr) const;

  // What one of the CPU's threads cycles through while it runs `ops` (a repeat's body, or
  // a phase): the bytes of the distinct tensors they touch, for each replica that shares
  // the thread (R / threads of them; a lone replica spreads its GEMMs' columns over the
  // threads, each a share of the operands). 0 unless the profile prices cold operands.
  [[nodiscard]] double working_set(const std::vector<Op>& ops) const;

  // On a CPU, what the engine's threads wait at the segments of a list of ops run once (a
  // phase's `ops` and its schedule): barriers and runs of the pool.
  [[nodiscard]] double list_waits(const std::vector<Op>& ops, const OpsSchedule& list) const;
  // Whether a phase's preload loads move beside its compute: on a device always; on a
  // CPU when the schedule gives them the engine's IO thread.
  [[nodiscard]] bool preloads_overlap(const PhaseSchedule& phase) const {
    return !cpu_ || phase.preload_on_io_thread;
  }
  [[nodiscard]] double cycle_meeting_seconds() const { return cycle_meeting_; }

 private:
  Seconds replica_time(const Op& op, double working_set, double accumulating,
                       const ScheduleItem* item) const;
  Seconds repeat(const Op& op, const ScheduleItem* item) const;
  [[nodiscard]] double segment_barriers(const ScheduleItem& segment) const;
  [[nodiscard]] double segment_lane_runs(const ScheduleItem& segment) const;
  [[nodiscard]] std::int64_t pool_runs(const std::vector<Op>& ops, const OpsSchedule& list,
                                       std::int64_t steps, bool across) const;
  Seconds stream(const LinkProfile& link, std::uint64_t bytes) const;
  Seconds io_stream(const LinkProfile& link, std::uint64_t bytes) const;
  double backward(const Op& op, double working_set, double accumulating) const;
  std::uint64_t rows(const Op& op) const;
  OpGemms gemms(const Op& op) const;
  double efficiency(const Gemm& m, std::uint64_t op_rows) const;
  bool small_kernels(std::uint64_t op_rows) const;
  double cold_operand_seconds(const Gemm& m, std::uint64_t op_rows, double working_set) const;
  double compute(std::uint64_t flops, const OpGemms& g, std::uint64_t op_rows,
                 double working_set) const;
  double column_share(const Gemm& m) const;
  double element_spread(std::int64_t elements, double seconds) const;
  double collective(const Op& op, int phases) const;
  double on_host(std::uint64_t bytes_per_replica) const;
  double cross_host(const CollectiveTraffic& t) const;

  const Plan& plan_;
  const DeviceProfile& p_;
  double fraction_;
  TrafficCount* traffic_;  // null: every replica on one host
  const Schedule& schedule_;
  std::uint64_t r_;
  bool cpu_ = false;
  bool full_ = false;  // a CPU under execution.sync_pattern full
  // A CPU profile's threads (all 1 for a device per replica): turns of the replicas on
  // the threads, the share of a collective's copies per thread, the threads one
  // replica's GEMMs use.
  double turns_ = 1.0;
  double collective_share_ = 1.0;
  std::int64_t gemm_threads_ = 1;
  double spread_efficiency_ = 1.0;  // of a spread GEMM's blocks, against the threads' own
  double io_sync_ = 0.0;            // sync_overhead per transfer, unless single_pipeline
  double pool_wait_ = 0.0;          // a CPU's run of the pool, or a barrier of its threads
  double lane_run_ = 0.0;           // a CPU's run of a ladder set's pool, its threads spinning
  double cycle_meeting_ = 0.0;      // a pipelined group's meeting at a cycle, on a CPU
  std::int64_t io_streams_ = 1;     // devices streaming over the host link at once
  // A CPU: what the cold part of the remote store's copies adds, per byte copied.
  double copy_cold_seconds_per_byte_ = 0.0;
  // A CPU: what the cold part of the optimizer's state adds to its step, per FLOP.
  double optimizer_cold_seconds_per_flop_ = 0.0;
};

}  // namespace popkit::planner
