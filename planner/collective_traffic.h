// The messages of the collectives between replicas, counted host by host for a network
// profile (cost.h collective_traffic): the cost model prices the cross-host ones with
// the network's bandwidth and latency.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/cost.h"

namespace popkit::planner {

// The messages of one collective op, replica by replica and host by host.
class TrafficCount {
 public:
  TrafficCount(const Plan& plan, const NetworkProfile& net)
      : plan_(plan),
        net_(net),
        n_hosts_(net.n_hosts(plan.replication_factor)),
        messages_(static_cast<std::size_t>(plan.replication_factor)),
        host_out_(static_cast<std::size_t>(n_hosts_)),
        host_in_(static_cast<std::size_t>(n_hosts_)) {}

  [[nodiscard]] const NetworkProfile& network() const { return net_; }

  CollectiveTraffic count(const Op& op);

 private:
  // A copy within one replica is no message; each byte sent is a byte received.
  void send(std::int64_t from, std::int64_t to, std::uint64_t nbytes);
  // Every member of each group of `g` receives a slice from every member, of
  // slice(receiver, sender's place in the group) elements of `element_bytes` each.
  template <typename Slice>
  void exchange(const ReplicaGrouping& g, std::uint64_t element_bytes, Slice slice);

  const Plan& plan_;
  const NetworkProfile& net_;
  std::int64_t n_hosts_;
  std::vector<std::uint64_t> messages_;  // by replica, sent across hosts
  std::vector<std::uint64_t> host_out_, host_in_;
  CollectiveTraffic t_;
};

}  // namespace popkit::planner
