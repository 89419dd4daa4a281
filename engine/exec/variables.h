// The plan's variables as values: read and written by name, one value per group or per
// replica, whole even when sharded or remote. A sharded variable is read through the
// world's all_gather, so a process reads only the replicas it hosts; every rank must
// call the reads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/exec/state.h"

namespace popkit::engine {

class Variables {
 public:
  explicit Variables(EngineState& state);

  // The variable named `name`; an error listing the plan's variables when none is.
  [[nodiscard]] const planner::Variable& find(const std::string& name) const;
  // The full values of `v` (meta shape, flat) as replica r's group holds them.
  [[nodiscard]] std::vector<float> read_replica(const planner::Variable& v, std::int64_t r) const;
  // `values` (the full tensor) into every hosted member of variables group `group`.
  void write_group(const planner::Variable& v, std::int64_t group, std::span<const float> values);

 private:
  std::byte* home(const planner::Variable& v, std::int64_t r) const;
  void write_replica(const planner::Variable& v, std::int64_t r, std::span<const float> full);

  EngineState& m_;
  // By name, built once: checkpoints read and write every variable by name.
  std::unordered_map<std::string, int> index_;
};

}  // namespace popkit::engine
