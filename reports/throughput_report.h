// `popreport throughput`: samples/s (median, min, max), time per step, time per phase
// and per op kind (compute, collective, remote, host IO), bytes moved per kind; the
// plan's estimate beside the run's measurement.
#pragma once

#include <vector>

#include "reports/source.h"
#include "reports/table.h"

namespace popkit::reports {

// Three tables per source: "throughput" (summary), "phase_times", "bytes_moved".
Report throughput_report(const std::vector<Source>& sources);

}  // namespace popkit::reports
