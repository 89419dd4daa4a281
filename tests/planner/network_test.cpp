// The cost model's network profile: each collective's bytes split into those within a
// host and those across hosts, counted by hand for tiny tensors (R=4, two replicas per
// host), and the step time priced with the network's bandwidth and latency.
#include <fmt/format.h>

#include <boost/test/unit_test.hpp>
#include <sstream>
#include <string>

#include "planner/build.h"
#include "planner/cost.h"
#include "planner/plan_json.h"
#include "planner/plan_text.h"
#include "tests/planner/configs.h"

using namespace popkit::planner;

namespace {

// A plan of R replicas whose tensors are float32 vectors of the given lengths; collective
// ops name them by index.
Plan vectors(std::int64_t r, std::initializer_list<std::int64_t> lengths) {
  Plan p;
  p.replication_factor = r;
  for (const std::int64_t n : lengths) {
    DeviceTensor t;
    t.name = "t" + std::to_string(p.tensors.size());
    t.shape = {n};
    t.nelms = n;
    t.nbytes = static_cast<std::uint64_t>(n) * 4;
    p.tensors.push_back(t);
  }
  return p;
}

Op all_reduce(const ReplicaGrouping& g, int tensor) {
  Op op;
  op.kind = OpKind::kAllReduce;
  op.grouping = g;
  op.state = {tensor};
  return op;
}

Op shard_op(OpKind kind, const ReplicaGrouping& g, int src, int dst) {
  Op op;
  op.kind = kind;
  op.grouping = g;
  op.shard_grouping = g;
  op.inputs = {src};
  op.outputs = {dst};
  return op;
}

NetworkProfile per_host(std::int64_t p, double bytes_per_second = 1.25e9,
                        double latency_seconds = 5e-6) {
  return {p, bytes_per_second, latency_seconds};
}

// The network's part of a plan's estimate, priced again with another network.
double step_seconds(const NetworkProfile& n) {
  auto c = popkit::planner::test::mnist_phased();
  c.replication.factor = 4;
  c.replication.groupings = {{"everyone", 4, 1}};
  return build_plan(c, Program::kTrain, nullptr, &n).estimated_step_seconds;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(network)

BOOST_AUTO_TEST_CASE(all_reduce_of_8_floats_over_2_hosts_of_2) {
  // R=4 in one group, hosts {0,1} {2,3}; 32 bytes in owner chunks of 8. Replica 0 sends
  // chunks 1, 2, 3 to their owners and chunk 0's sum back to 1, 2, 3, and receives as
  // much: with replica 1 8 + 8 each way (32), with replicas 2 and 3 16 + 16 each way (64).
  Plan p = vectors(4, {8});
  const Op op = all_reduce({4, 4, 1}, 0);
  const CollectiveTraffic t = collective_traffic(p, op, per_host(2));
  BOOST_TEST(t.on_host_bytes == 4u * 32);
  BOOST_TEST(t.cross_host_bytes == 4u * 64);
  BOOST_TEST(t.busiest_link_bytes == 64u);  // replicas 0 and 1 send 32 each across
  BOOST_TEST(t.busiest_messages == 4u);     // two chunks out, two sums back
  // Together, the mean the cost model gives every collective: 4 (G-1) / G of 32.
  p.phases.push_back({"reduce", {op}, {}, 0.0, -1, {}});
  annotate_costs(p);
  BOOST_TEST(p.phases[0].ops[0].collective_bytes == (t.on_host_bytes + t.cross_host_bytes) / 4);
  BOOST_TEST(p.phases[0].ops[0].collective_bytes == 96u);
}

BOOST_AUTO_TEST_CASE(all_reduce_split_moves_with_replicas_per_host) {
  const Plan p = vectors(4, {8});
  const Op op = all_reduce({4, 4, 1}, 0);
  const CollectiveTraffic one = collective_traffic(p, op, per_host(1));  // a host each
  BOOST_TEST(one.on_host_bytes == 0u);
  BOOST_TEST(one.cross_host_bytes == 4u * 96);
  BOOST_TEST(one.busiest_link_bytes == 48u);
  BOOST_TEST(one.busiest_messages == 6u);
  const CollectiveTraffic all = collective_traffic(p, op, per_host(4));  // one host
  BOOST_TEST(all.on_host_bytes == 4u * 96);
  BOOST_TEST(all.cross_host_bytes == 0u);
  BOOST_TEST(all.busiest_link_bytes == 0u);
  BOOST_TEST(all.busiest_messages == 0u);
}

BOOST_AUTO_TEST_CASE(all_reduce_of_10_floats_has_uneven_chunks) {
  // 10 elements over 4 owners: chunks of 3, 3, 2, 2 (12, 12, 8, 8 bytes). Replica 0 with
  // replica 1: 12 out, 12 in, 12 back out, 12 back in (48); replicas 2 and 3: 8 each way
  // per round (32). Across: every replica 80 (replica 0: 8 + 8 out, 12 + 12 in, 12 + 12
  // out, 8 + 8 in).
  const Plan p = vectors(4, {10});
  const CollectiveTraffic t = collective_traffic(p, all_reduce({4, 4, 1}, 0), per_host(2));
  BOOST_TEST(t.on_host_bytes == 48u + 48 + 32 + 32);
  BOOST_TEST(t.cross_host_bytes == 4u * 80);
  BOOST_TEST(t.busiest_link_bytes == 80u);
}

BOOST_AUTO_TEST_CASE(groups_within_a_host_cross_nothing_groups_across_cross_everything) {
  const Plan p = vectors(4, {8});
  // (2, 1): {0,1} {2,3}, each on one host; (2, 2): {0,2} {1,3}, each across both.
  const CollectiveTraffic within = collective_traffic(p, all_reduce({4, 2, 1}, 0), per_host(2));
  // Chunks of 16 bytes: each member sends one and gets the other's sum back, and receives
  // as much, 64 bytes each: 4 (G-1) / G of 32.
  BOOST_TEST(within.on_host_bytes == 4u * 64);
  BOOST_TEST(within.cross_host_bytes == 0u);
  const CollectiveTraffic across = collective_traffic(p, all_reduce({4, 2, 2}, 0), per_host(2));
  BOOST_TEST(across.on_host_bytes == 0u);
  BOOST_TEST(across.cross_host_bytes == 4u * 64);
  BOOST_TEST(across.busiest_link_bytes == 64u);  // replicas 0 and 1 send 32 each
  BOOST_TEST(across.busiest_messages == 2u);
}

BOOST_AUTO_TEST_CASE(reduce_scatter_of_8_floats_into_shards_of_2) {
  // Replica m receives its slice (8 bytes) from the 3 others and sends theirs to them:
  // one of them on its host (8 + 8), two across (32).
  const Plan p = vectors(4, {8, 2});
  const CollectiveTraffic t =
      collective_traffic(p, shard_op(OpKind::kReduceScatter, {4, 4, 1}, 0, 1), per_host(2));
  BOOST_TEST(t.on_host_bytes == 4u * 16);
  BOOST_TEST(t.cross_host_bytes == 4u * 32);
  BOOST_TEST(t.busiest_link_bytes == 32u);
  BOOST_TEST(t.busiest_messages == 2u);
}

BOOST_AUTO_TEST_CASE(all_gather_of_shards_of_3_into_10_floats) {
  // Shards of 3 floats; the last is truncated to 1 (4 * 3 = 12 > 10). Member k sends its
  // shard (12, 12, 12, 4 bytes) to each other member. On host: 0<->1 (12 + 12) and 2<->3
  // (12 + 4), sent 40; across: 0 and 1 send 2 x 12 each, 2 sends 2 x 12, 3 sends 2 x 4:
  // sent 80. Host 0 sends 48 and receives 32.
  const Plan p = vectors(4, {3, 10});
  const CollectiveTraffic t =
      collective_traffic(p, shard_op(OpKind::kAllGather, {4, 4, 1}, 0, 1), per_host(2));
  BOOST_TEST(t.on_host_bytes == 2u * 40);
  BOOST_TEST(t.cross_host_bytes == 2u * 80);
  BOOST_TEST(t.busiest_link_bytes == 48u);
  BOOST_TEST(t.busiest_messages == 2u);
}

BOOST_AUTO_TEST_CASE(step_time_prices_cross_host_bytes_and_messages) {
  // One all_reduce of 8 floats, R=4, hosts of 2: 2 x 1 us (GCL's all-reduce is a
  // reduce-scatter and an all-gather, a link latency each), then the bytes. One host: 96 /
  // 2 / 1e9 s. Hosts of 2: on host 32 / 2 / 1e9 s, across 4 messages x 5 us + 64 bytes /
  // 1.25e9 B/s (10 Gb/s); the longer one counts.
  Plan p = vectors(4, {8});
  p.global_batch_size = 4;
  p.phases.push_back({"reduce", {all_reduce({4, 4, 1}, 0)}, {}, 0.0, -1, {}});
  annotate_costs(p);
  DeviceProfile d;
  d.flops_per_second = 1e12;
  d.ipu_link = {1e9, 1e-6, 1.0};
  estimate_time(p, d);
  BOOST_TEST(p.estimated_step_seconds == 2e-6 + 48.0 / 1e9, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(!p.network.has_value());
  const NetworkProfile n = per_host(2);
  estimate_time(p, d, &n);
  BOOST_TEST(p.estimated_step_seconds == 2e-6 + 4 * 5e-6 + 64 / 1.25e9,
             boost::test_tools::tolerance(1e-12));
  BOOST_REQUIRE(p.network.has_value());
  BOOST_TEST(p.network->n_hosts == 2);
  BOOST_TEST(p.network->on_host_bytes == 32u);
  BOOST_TEST(p.network->cross_host_bytes == 64u);
  BOOST_TEST(p.network->network_bytes == 128u);
  BOOST_TEST(p.network->messages == 4u);
  BOOST_TEST(p.network->seconds == 2e-6 + 4 * 5e-6 + 64 / 1.25e9 - (2e-6 + 48.0 / 1e9),
             boost::test_tools::tolerance(1e-9));
  // A fast network with no latency: the on-host links are the slower side again.
  const NetworkProfile fast = per_host(2, 1e12, 0.0);
  estimate_time(p, d, &fast);
  BOOST_TEST(p.estimated_step_seconds == 2e-6 + 16.0 / 1e9, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(one_host_changes_nothing) {
  auto c = popkit::planner::test::mnist_phased();
  const Plan plain = build_plan(c);
  const NetworkProfile n = per_host(2);  // R=2: both on one host
  const Plan one_host = build_plan(c, Program::kTrain, nullptr, &n);
  BOOST_TEST(one_host.estimated_step_seconds == plain.estimated_step_seconds);
  for (std::size_t i = 0; i < plain.phases.size(); ++i)
    BOOST_TEST(one_host.phases[i].estimated_seconds == plain.phases[i].estimated_seconds);
  BOOST_REQUIRE(one_host.network.has_value());
  BOOST_TEST(one_host.network->cross_host_bytes == 0u);
  BOOST_TEST(one_host.network->seconds == 0.0);
  BOOST_TEST(!plain.network.has_value());
  BOOST_TEST(!plan_to_json(plain).contains("network"));
  BOOST_TEST(plan_to_json(one_host).contains("network"));
}

BOOST_AUTO_TEST_CASE(bandwidth_and_latency_move_the_estimate_by_their_share) {
  // R=4, one replica per host: every collective byte crosses. The estimate is linear in
  // the latency (times the messages) and in 1 / bandwidth (times the busiest link bytes).
  auto c = popkit::planner::test::mnist_phased();
  c.replication.factor = 4;
  c.replication.groupings = {{"everyone", 4, 1}};
  const NetworkProfile slow = per_host(1, 1.25e9, 5e-6);
  const Plan p = build_plan(c, Program::kTrain, nullptr, &slow);
  BOOST_REQUIRE(p.network.has_value());
  const NetworkEstimate& n = *p.network;
  BOOST_TEST(n.on_host_bytes == 0u);
  BOOST_TEST(n.cross_host_bytes > 0u);
  BOOST_TEST(n.network_bytes == 4 * n.cross_host_bytes / 2);
  BOOST_TEST(n.seconds > 0.0);

  const double at_10 = step_seconds(slow);
  const double at_100 = step_seconds(per_host(1, 12.5e9, 5e-6));
  const double at_20us = step_seconds(per_host(1, 1.25e9, 20e-6));
  BOOST_TEST(at_100 < at_10);
  BOOST_TEST(at_20us > at_10);
  const auto bytes = static_cast<double>(n.busiest_link_bytes);
  BOOST_TEST(at_10 - at_100 == bytes / 1.25e9 - bytes / 12.5e9, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(at_20us - at_10 == 15e-6 * static_cast<double>(n.messages),
             boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(plan_text_shows_the_network) {
  auto c = popkit::planner::test::mnist_phased();
  c.replication.factor = 4;
  c.replication.groupings = {{"everyone", 4, 1}};
  const NetworkProfile n = per_host(2);
  const Plan p = build_plan(c, Program::kTrain, nullptr, &n);
  std::ostringstream out;
  print_plan(out, p);
  const std::string text = out.str();
  BOOST_TEST(text.find("  network: 2 hosts x 2 replicas, 10 Gb/s links, 5 us per message\n") !=
             std::string::npos);
  BOOST_TEST(text.find(fmt::format("crossing the network per step: {} in all",
                                   format_bytes(p.network->network_bytes))) != std::string::npos);
  BOOST_TEST(text.find("the network adds") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
