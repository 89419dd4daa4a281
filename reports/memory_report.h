// `popreport memory`: device memory per replica and phase (always-live, not-always-live,
// peak, and the breakdown by class), and streaming memory per replica; for a run, the
// planned row beside the measured one with the difference.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "reports/source.h"
#include "reports/table.h"

namespace popkit::reports {

// Two tables per source: "memory" (per phase) and "streaming".
Report memory_report(const std::vector<Source>& sources);

// The tensor classes of the memory breakdown and their titles, in the tables' and the
// chart's order ("Weights", "Grad accumulators", ...).
const std::vector<std::pair<planner::TensorClass, std::string>>& memory_classes();

}  // namespace popkit::reports
