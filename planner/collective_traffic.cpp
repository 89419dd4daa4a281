// The collectives' messages host by host (collective_traffic.h).
#include "planner/collective_traffic.h"

#include <algorithm>

#include "planner/operands.h"
#include "planner/sharding.h"

namespace popkit::planner {
namespace {

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

const DeviceTensor& tensor_of(const Plan& plan, int t) {
  return plan.tensors[static_cast<std::size_t>(t)];
}

}  // namespace

template <typename Slice>
void TrafficCount::exchange(const ReplicaGrouping& g, std::uint64_t element_bytes, Slice slice) {
  for (std::int64_t group = 0; group < g.n_groups(); ++group) {
    const auto members = g.members(group);
    for (const auto to : members)
      for (std::size_t k = 0; k < members.size(); ++k)
        send(members[k], to, u(slice(to, static_cast<std::int64_t>(k))) * element_bytes);
  }
}

CollectiveTraffic TrafficCount::count(const Op& op) {
  std::fill(messages_.begin(), messages_.end(), 0);
  std::fill(host_out_.begin(), host_out_.end(), 0);
  std::fill(host_in_.begin(), host_in_.end(), 0);
  t_ = {};
  const ReplicaGrouping& g = op.grouping;
  switch (op.kind) {
    case OpKind::kAllReduce: {
      // Owner chunks (engine/runtime/collectives.h owner_chunk): n = q G + r elements,
      // chunk k holds q + (k < r) of them. Every member sends chunk k to its owner, the
      // member of rank k, which sends the sum back to every other member.
      const DeviceTensor& t = tensor_of(plan_, op.state[0]);
      const auto e = static_cast<std::uint64_t>(dtype_size(t.dtype));
      for (std::int64_t group = 0; group < g.n_groups(); ++group) {
        const auto members = g.members(group);
        const auto n_members = static_cast<std::int64_t>(members.size());
        for (std::int64_t k = 0; k < n_members; ++k) {
          const std::uint64_t chunk = u(owner_chunk(t.nelms, n_members, k).n) * e;
          if (chunk == 0) continue;
          const std::int64_t owner = members[static_cast<std::size_t>(k)];
          for (const auto m : members) {
            send(m, owner, chunk);
            send(owner, m, chunk);
          }
        }
      }
      break;
    }
    case OpKind::kReduceScatter: {
      // The member of shard rank k receives slice k, truncated to the tensor, from every
      // other member of its group in `grouping`.
      const DeviceTensor& src = tensor_of(plan_, op.inputs[shard_operand::kSrc]);
      const DeviceTensor& dst = tensor_of(plan_, op.outputs[shard_operand::kDst]);
      const auto e = static_cast<std::uint64_t>(dtype_size(dst.dtype));
      exchange(g, e, [&](std::int64_t to, std::int64_t) {
        return shard_extent(src.nelms, dst.nelms, op.shard_grouping.rank_in_group(to));
      });
      break;
    }
    case OpKind::kAllGather: {
      // Every member receives the shard of every other, truncated to its destination.
      const DeviceTensor& src = tensor_of(plan_, op.inputs[shard_operand::kSrc]);
      const DeviceTensor& dst = tensor_of(plan_, op.outputs[shard_operand::kDst]);
      const auto e = static_cast<std::uint64_t>(dtype_size(dst.dtype));
      exchange(g, e,
               [&](std::int64_t, std::int64_t k) { return shard_extent(dst.nelms, src.nelms, k); });
      break;
    }
    case OpKind::kRepeat: {
      CollectiveTraffic sum;
      for (const Op& inner : op.body) {
        const CollectiveTraffic c = count(inner);
        sum.on_host_bytes += c.on_host_bytes * u(op.steps);
        sum.cross_host_bytes += c.cross_host_bytes * u(op.steps);
        sum.busiest_link_bytes += c.busiest_link_bytes * u(op.steps);
        sum.busiest_messages += c.busiest_messages * u(op.steps);
      }
      return sum;
    }
    default:
      return {};
  }
  for (std::size_t h = 0; h < host_out_.size(); ++h)
    t_.busiest_link_bytes = std::max({t_.busiest_link_bytes, host_out_[h], host_in_[h]});
  t_.busiest_messages = *std::max_element(messages_.begin(), messages_.end());
  return t_;
}

void TrafficCount::send(std::int64_t from, std::int64_t to, std::uint64_t nbytes) {
  if (from == to || nbytes == 0) return;
  const std::int64_t hf = net_.host_of(from);
  const std::int64_t ht = net_.host_of(to);
  if (hf == ht) {
    t_.on_host_bytes += 2 * nbytes;
    return;
  }
  t_.cross_host_bytes += 2 * nbytes;
  host_out_[static_cast<std::size_t>(hf)] += nbytes;
  host_in_[static_cast<std::size_t>(ht)] += nbytes;
  ++messages_[static_cast<std::size_t>(from)];
}

CollectiveTraffic collective_traffic(const Plan& plan, const Op& op,
                                     const NetworkProfile& network) {
  TrafficCount count(plan, network);
  return count.count(op);
}

}  // namespace popkit::planner
