// `--chart FILE.svg`: per source, device memory per phase as stacked bars (always-live
// below, not-always-live above; planned beside measured for a run) and, for runs, the
// training loss per step and the time per phase (planned beside measured). Plain SVG 1.1
// that any renderer draws; the size is fixed by the content (chart_size).
#pragma once

#include <iosfwd>
#include <vector>

#include "reports/source.h"

namespace popkit::reports {

struct ChartSize {
  int width = 0;
  int height = 0;
};

ChartSize chart_size(const std::vector<Source>& sources);
void write_chart(const std::vector<Source>& sources, std::ostream& out);

// Writes the chart to `path`; throws popkit::Error when the file cannot be written.
void write_chart_file(const std::vector<Source>& sources, const std::string& path);

}  // namespace popkit::reports
