// Plans and replica groupings as text, the way PopXL's schedule printouts read: the
// verdict, the configuration, layers, remote buffers, variables (placement, sharding),
// on request the device tensors and the phases with their ops, and the memory tables.
// Writes to an injected stream so every printout has a golden-output test.
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

// What the text of a plan holds: the verdict, peak, estimate and fit advice first, then
// the configuration, layers, buffers, variables, the pipeline and memory per phase; with
// `ops` the device tensors and every phase's ops too. Tables wider than 100 columns are
// printed in blocks of columns, unless `wide`.
struct PlanText {
  bool ops = false;
  bool wide = false;
};

void print_plan(std::ostream& out, const Plan& plan, const PlanText& options = {});

// The "Group | Replicas" table of a grouping: one row per group, its members in order.
void print_grouping(std::ostream& out, const ReplicaGrouping& grouping);

// {"factor", "group_size", "stride", "n_groups", "groups": [[members], ...]}
nlohmann::json grouping_to_json(const ReplicaGrouping& grouping);

}  // namespace popkit::planner
