// ReplicaGrouping: which replicas share a variable, reduce together or hold the
// shards of one tensor. It is PopXL's ReplicaGrouping(group_size, stride) over the
// replication factor R, stored as three numbers so that a plan's size never grows
// with R; the members of a group are computed when needed.
#pragma once

#include <cstdint>
#include <vector>

namespace popkit::planner {

struct ReplicaGrouping {
  std::int64_t factor = 1;      // R, the replication factor
  std::int64_t group_size = 1;  // replicas per group
  std::int64_t stride = 1;      // distance between consecutive members

  // Rules (checked by config validation, assumed here):
  //   stride == 1: R % group_size == 0;   stride != 1: stride * group_size == R.
  [[nodiscard]] std::int64_t n_groups() const { return factor / group_size; }

  // stride == 1: group r / group_size;  stride != 1: group r % stride.
  [[nodiscard]] std::int64_t group_of(std::int64_t replica) const {
    return stride == 1 ? replica / group_size : replica % stride;
  }

  // Position of a replica among its group's members, in replica order.
  [[nodiscard]] std::int64_t rank_in_group(std::int64_t replica) const {
    return stride == 1 ? replica % group_size : replica / stride;
  }

  // The replica holding rank `rank` of group `group`.
  [[nodiscard]] std::int64_t member(std::int64_t group, std::int64_t rank) const {
    return stride == 1 ? group * group_size + rank : group + rank * stride;
  }

  // Members of a group in replica order.
  [[nodiscard]] std::vector<std::int64_t> members(std::int64_t group) const {
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(group_size));
    for (std::int64_t k = 0; k < group_size; ++k) out.push_back(member(group, k));
    return out;
  }

  friend bool operator==(const ReplicaGrouping&, const ReplicaGrouping&) = default;
};

}  // namespace popkit::planner
