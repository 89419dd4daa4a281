// Pictures of a plan's structure, drawn from the planner's own data with the chart kit
// (reports/svg.h), for `popplan groups --svg` and `popplan plan --svg`: which replicas
// each replica grouping puts together; what each phase of a plan moves and computes,
// with its device memory; and a pipelined plan's 1F1B schedule on its devices, with the
// cycles at which the sync pattern makes them meet.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/replica_grouping.h"

namespace popkit::reports {

struct NamedGrouping {
  std::string name;
  planner::ReplicaGrouping grouping;
};

// A row of boxes per replica is readable up to this many replicas; more is refused.
inline constexpr std::int64_t kMostDrawnReplicas = 64;
// A pipeline's rows: one per device (replicas x stages).
inline constexpr std::int64_t kMostDrawnDevices = 32;

// One row per grouping: a box per replica, coloured and labelled by its group. `notes`
// go under the title (which grouping holds the variables, which the shards). Throws
// popkit::Error past kMostDrawnReplicas.
void write_groups_svg(std::ostream& out, const std::vector<NamedGrouping>& groupings,
                      const std::vector<std::string>& notes = {});

// A pipelined plan: its schedule (pipeline stages > 1; throws popkit::Error past
// kMostDrawnDevices). Otherwise a column per phase, in execution order: the bytes it
// loads from streaming memory and gathers, the micro-batches it computes, the gradients
// it reduces, the variables it updates, the bytes it stores back, and its peak device
// memory.
void write_plan_svg(std::ostream& out, const planner::Plan& plan);

// Runs `draw` into `path`; throws popkit::Error when the file cannot be written.
void write_svg_file(const std::string& path, const std::function<void(std::ostream&)>& draw);

}  // namespace popkit::reports
