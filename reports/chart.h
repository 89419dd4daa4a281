// `--chart FILE.svg`: each verb draws its own chart, in plain SVG 1.1 that any renderer
// draws. Every panel has axis titles with units, 4 to 6 ticks with gridlines, a legend,
// and titles and labels fitted to the width (reports/svg.h).
//   memory      per source: device memory per phase as bars stacked by tensor class,
//               planned beside measured for a run.
//   throughput  time per optimizer step by phase, and for runs samples/s per step and
//               each run's loss per step with its test loss after evaluated epochs.
//   compare     one chart across the sources: peak memory per phase as grouped bars,
//               time per phase as grouped bars, the loss curves overlaid.
// Times are set against each other only when they are of the same device (a plan's
// estimate is for its device profile, a run is measured on this CPU); a panel says what
// it left out and why.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "reports/source.h"

namespace popkit::reports {

enum class ChartKind { kMemory, kThroughput, kCompare };

struct ChartSize {
  int width = 0;
  int height = 0;
};

// `names` label the sources in legends (compare's row names); empty: the sources' names.
ChartSize chart_size(const std::vector<Source>& sources, ChartKind kind,
                     const std::vector<std::string>& names = {});
void write_chart(const std::vector<Source>& sources, ChartKind kind, std::ostream& out,
                 const std::vector<std::string>& names = {});

// Writes the chart to `path`; throws popkit::Error when the file cannot be written.
void write_chart_file(const std::vector<Source>& sources, ChartKind kind, const std::string& path,
                      const std::vector<std::string>& names = {});

}  // namespace popkit::reports
