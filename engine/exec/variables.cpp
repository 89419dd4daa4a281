// Variables read and written by name, shard by shard (variables.h).
#include "engine/exec/variables.h"

#include <Eigen/Core>

#include "base/error.h"

namespace popkit::engine {

using planner::Variable;

Variables::Variables(EngineState& state) : m_(state) {
  const auto& vars = m_.plan.variables;
  index_.reserve(vars.size());
  for (std::size_t i = 0; i < vars.size(); ++i)  // the first of a name wins
    index_.emplace(vars[i].name, static_cast<int>(i));
}

const Variable& Variables::find(const std::string& name) const {
  if (const auto it = index_.find(name); it != index_.end())
    return m_.plan.variables[static_cast<std::size_t>(it->second)];
  std::vector<std::string> names;
  for (const auto& v : m_.plan.variables) names.push_back(v.name);
  throw Error("no variable '{}' in the plan (it has: {})", name, fmt::join(names, ", "));
}

// The bytes of the variable's home on replica r (its shard when sharded).
std::byte* Variables::home(const Variable& v, std::int64_t r) const {
  if (v.remote) return m_.replica(r).store->entry(v.buffer, v.entry);
  Device& dev = m_.holder(r, v.device_tensor);
  std::byte* p = dev.tensors[static_cast<std::size_t>(v.device_tensor)];
  if (!p) throw Error("variable '{}': its device tensor is not allocated", v.name);
  return p;
}

// Each shard comes from the member holding it through the world's all_gather; shard k's
// member precedes shard k+1's in replica order, so the gathered shards are the flat
// tensor, padding last.
std::vector<float> Variables::read_replica(const Variable& v, std::int64_t r) const {
  const auto& sharding = m_.plan.sharding_grouping;
  const std::int64_t n_shards = v.sharded ? sharding.group_size : 1;
  const std::int64_t count = v.sharded ? v.shard_size : v.nelms;
  const std::int64_t group = sharding.group_of(r);
  std::vector<float> mine;
  for (std::int64_t k = 0; k < n_shards; ++k) {
    const std::int64_t member = v.sharded ? sharding.member(group, k) : r;
    if (!m_.hosted.hosts(member)) continue;
    const std::byte* src = home(v, member);
    for (std::int64_t i = 0; i < count; ++i) {
      if (v.dtype == planner::DType::kFloat16)
        mine.push_back(static_cast<float>(reinterpret_cast<const Eigen::half*>(src)[i]));
      else
        mine.push_back(reinterpret_cast<const float*>(src)[i]);
    }
  }
  std::vector<float> full = all_gather_values(*m_.world, std::span<const float>(mine));
  POPKIT_ASSERT(static_cast<std::int64_t>(full.size()) == n_shards * count);
  full.resize(static_cast<std::size_t>(v.nelms));
  return full;
}

void Variables::write_replica(const Variable& v, std::int64_t r, std::span<const float> full) {
  const std::int64_t k = v.sharded ? m_.plan.sharding_grouping.rank_in_group(r) : 0;
  std::byte* dst = home(v, r);
  const std::int64_t begin = k * v.shard_size;
  for (std::int64_t i = 0; i < v.shard_size; ++i) {
    const std::int64_t e = begin + i;
    const float x = e < v.nelms ? full[static_cast<std::size_t>(e)] : 0.0f;  // padding is zero
    if (v.dtype == planner::DType::kFloat16)
      reinterpret_cast<Eigen::half*>(dst)[i] = static_cast<Eigen::half>(x);
    else
      reinterpret_cast<float*>(dst)[i] = x;
  }
}

void Variables::write_group(const Variable& v, std::int64_t group, std::span<const float> values) {
  if (static_cast<std::int64_t>(values.size()) != v.nelms)
    throw Error("variable '{}' has shape {} ({} elements), got {} values", v.name,
                shape_str(v.meta_shape), v.nelms, values.size());
  const auto& grouping = m_.plan.variables_grouping;
  if (group < 0 || group >= grouping.n_groups())
    throw Error("variable '{}': group {} out of range ({} groups)", v.name, group,
                grouping.n_groups());
  for (const auto r : grouping.members(group))
    if (m_.hosted.hosts(r)) write_replica(v, r, values);
}

}  // namespace popkit::engine
