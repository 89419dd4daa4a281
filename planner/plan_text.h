// Plans and replica groupings as text, the way PopXL's schedule printouts read: the
// header, layers, remote buffers, variables (placement, sharding), device tensors, the
// phases with their ops, and the memory table. Writes to an injected stream so every
// printout has a golden-output test.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "planner/plan.h"
#include "planner/replica_grouping.h"

namespace popkit::planner {

// 0 -> "0 B", 1536 -> "1.50 KiB", 943718400 -> "900.00 MiB".
std::string format_bytes(std::uint64_t bytes);

void print_plan(std::ostream& out, const Plan& plan);

// The tuner's advice in one line: "fits with: --set a=b --set c=d (peak 812.00 MiB of
// 900.00 MiB, est. 41,200 samples/s; ...)", or that nothing fits, with the least peak.
std::string describe_advice(const FitAdvice& advice, std::uint64_t memory_per_replica);

// The "Group | Replicas" table of a grouping: one row per group, its members in order.
void print_grouping(std::ostream& out, const ReplicaGrouping& grouping);

// {"factor", "group_size", "stride", "n_groups", "groups": [[members], ...]}
nlohmann::json grouping_to_json(const ReplicaGrouping& grouping);

}  // namespace popkit::planner
