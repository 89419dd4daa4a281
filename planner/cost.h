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

// Fills every phase's estimated_seconds and the plan's estimated_step_seconds and
// estimated_samples_per_second. With io_mode io or io_overlapped, `plan.io_tiles` of the
// profile's tiles stream data and the rest compute; io_overlapped overlaps a repeat's
// streams with its compute: steps * max(compute, io) + min(compute, io).
//
// A collective takes link latency + (its bytes per replica) / 2 / link bandwidth. With
// `network`, that holds for its on-host bytes, while its cross-host bytes take
//   network latency * busiest_messages + busiest_link_bytes / network bandwidth
// (messages of one replica leave one after another; a host's replicas share its link), and
// the collective takes the longer of the two, as both kinds of link carry it at once.
// `plan.network` is then filled; without `network` it is reset, and nothing else differs.
void estimate_time(Plan& plan, const DeviceProfile& profile,
                   const NetworkProfile* network = nullptr);

}  // namespace popkit::planner
