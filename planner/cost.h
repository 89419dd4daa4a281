// The cost model: per op, per replica, the FLOPs and the bytes it moves (host, remote,
// collective), then a time estimate from a device profile. Collectives move what the
// engine's direct algorithms move (engine/runtime/collectives.h), sent + received, the
// mean over a group's G members rounded down to the byte: all-reduce 4 (G-1) / G of the
// tensor, all-gather 2 (G-1) / G of the full tensor, reduce-scatter 2 (G-1) / S of the
// scattered tensor (S shards); sent and received overlap on the links.
//
// With a network profile (replicas spread over hosts), each collective's messages are
// split into those within a host and those across hosts; the latter are priced at the
// network's bandwidth, shared by a host's replicas, plus its latency per message.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "planner/device_profile.h"
#include "planner/plan.h"

namespace popkit::planner {

// Fills flops, host_bytes, remote_bytes and collective_bytes of every op (a repeat:
// its body's sums times steps).
void annotate_costs(Plan& plan);

// What a collective op sends between replicas, split by the hosts of a network profile,
// for one execution of the op (a repeat: its body's sums times steps; other ops move
// nothing). Counted from the point-to-point messages of the direct algorithms, message by
// message, over every group: a message is one owner chunk (all_reduce, each way), one
// slice (reduce_scatter) or one shard (all_gather) from one member to another.
struct CollectiveTraffic {
  std::uint64_t on_host_bytes = 0;       // all replicas together, sent + received within a host
  std::uint64_t cross_host_bytes = 0;    // all replicas together, sent + received across hosts
  std::uint64_t busiest_link_bytes = 0;  // the busiest host's link, its busier direction
  std::uint64_t busiest_messages = 0;    // cross-host messages sent by the busiest replica
};
CollectiveTraffic collective_traffic(const Plan& plan, const Op& op, const NetworkProfile& network);

// A plan's estimated time on a profile: each phase's, the step's and the samples/s; a
// pipelined plan's stages and bubbles (a copy of the plan's PipelinePlan with its
// estimates set); the network's share when priced with a network profile.
struct StepEstimate {
  std::vector<double> phase_seconds;  // per phase
  double step_seconds = 0.0;
  double samples_per_second = 0.0;
  std::optional<PipelinePlan> pipeline;
  std::optional<NetworkEstimate> network;
};

// The plan priced with the profile (config/device_profile.h; docs/cost-model.md has the
// model and its calibration); the plan is left as it was:
//  - forward and backward: each GEMM [m, k] x [k, n] at flops_per_second *
//    gemm_efficiency(m, n, k), the rest of its FLOPs at vector_flops_per_second, plus
//    op_overhead; loss, optimizer step, zero, slice: element-wise, plus op_overhead;
//  - host and remote transfers: sync_overhead + the link's latency + bytes / (its
//    bytes_per_second * efficiency / the devices sharing it). By execution.sync_pattern:
//    full, the sync and every replica sharing the link (shared_by at most);
//    replica_and_ladder, the sync and half the replicas, as the other ladder set
//    computes meanwhile (on a CPU all of them: nothing makes the sets take turns);
//    single_pipeline, no sync. A pipelined plan under full runs its cycles in lockstep,
//    each as long as its longest slot, and on a CPU each meeting of a group adds
//    barrier_seconds;
//  - collectives: sync_overhead + link latency, each per synchronised exchange, +
//    (bytes per replica) / 2 / link rate (sent and received overlap);
//  - alloc and free: nothing;
//  - the step (one run of the program: a training step, an evaluation batch): the
//    profile's program_seconds once, beyond its phases (the host's launch and sync).
// On a CPU the engine's threads wait where the plan's schedule (planner/schedule.h) says,
// on the profile's threads: barrier_seconds for each run of the pool (a segment of local
// ops on R > 1 replicas) and each barrier of full's lanes (one per sync chunk a step), and
// pool_run_seconds for each run of a replica_and_ladder set's own pool.
// On a CPU profile with a `caches:` section, a GEMM adds the cold part of its weight-sized
// operand, and a remote copy the cold part of its bytes at the cold copy rate, the part
// set by a thread's working set (its replicas' tensors of a repeat's body or a phase; its
// replicas' remote buffers, device memory and host data of a step) on the profile's
// measured ramps, and an optimizer step the cold part of its FLOPs at the cold
// element-wise rate (the copies' ramp and working set: its state comes back once a step); a GEMM
// one replica spreads over the threads adds a run of the pool with its threads spinning
// (pool_run_seconds) and runs at gemm_spread_efficiency of its threads' rate. A profile
// that measured the running mean of the gradient accumulators (accumulate_seconds) prices
// it per weight at the micro-batches after the first of a repeat, instead of as 3 FLOPs a
// weight. With io_mode io or io_overlapped, `plan.io_tiles` of the profile's tiles stream
// data and only the rest compute (PopXL io_tiles). io_overlapped overlaps a repeat's stream
// bytes with its compute, a two-stage pipeline: steps * max(serial, bytes) +
// min(serial, bytes); latencies and syncs stay serial. Loads preloaded into a phase
// (execution.io_schedule: preload) overlap that phase. On a CPU both overlap only where
// the schedule gives them the engine's IO thread (a core left free, and at least
// kIoThreadMinBytes a step or a phase).
//
// A collective: sync_overhead and the link latency per synchronised exchange (GCL's
// all-reduce is two: a reduce-scatter then an all-gather), then its bytes. With
// `network`, its on-host bytes are priced as above, while its cross-host bytes take
//   network latency * busiest_messages + busiest_link_bytes / network bandwidth
// (messages of one replica leave one after another; a host's replicas share its link), and
// the bytes take the longer of the two, as both kinds of link carry them at once; the
// estimate's `network` says what it added.
[[nodiscard]] StepEstimate estimate_step(const Plan& plan, const DeviceProfile& profile,
                                         const NetworkProfile* network = nullptr);

// Sets the plan's estimates from `e`: every phase's estimated_seconds, the plan's
// estimated_step_seconds and estimated_samples_per_second, its pipeline's (when
// pipelined), and `network` (reset without one). Nothing else changes.
void record_estimate(Plan& plan, const StepEstimate& e);

// record_estimate(plan, estimate_step(plan, profile, network)).
void estimate_time(Plan& plan, const DeviceProfile& profile,
                   const NetworkProfile* network = nullptr);

}  // namespace popkit::planner
