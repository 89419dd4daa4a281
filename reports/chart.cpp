#include "reports/chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <ostream>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/units.h"

namespace popkit::reports {

namespace {

constexpr int kWidth = 800;
constexpr int kLeft = 90;  // room for the axis labels
constexpr int kRight = 20;
constexpr int kTitleHeight = 30;
constexpr std::size_t kMaxLabel = 40;
constexpr int kLegendHeight = 20;  // the memory panel's legend, under its title
constexpr int kMemoryPlot = 200;
constexpr int kMemoryLabels = 160;  // rotated phase names (at most kMaxLabel characters)
constexpr int kLossPlot = 160;
constexpr int kLossAxis = 40;
constexpr int kTimeRow = 26;

constexpr const char* kPlannedAlways = "#1f4e79";
constexpr const char* kPlannedRest = "#8fb8de";
constexpr const char* kMeasuredAlways = "#b35900";
constexpr const char* kMeasuredRest = "#f5b26b";

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Phase names longer than kMaxLabel are cut, so rotated labels stay under the bars.
std::string short_label(const std::string& name) {
  return name.size() <= kMaxLabel ? name : name.substr(0, kMaxLabel - 3) + "...";
}

bool is_run(const Source& s) {
  return s.kind == SourceKind::kRun;
}

int memory_height() {
  return kTitleHeight + kLegendHeight + kMemoryPlot + kMemoryLabels;
}
int loss_height() {
  return kTitleHeight + kLossPlot + kLossAxis;
}
int time_height(const Source& s) {
  return kTitleHeight + kTimeRow * static_cast<int>(s.record.phases.size() + 1);
}

int block_height(const Source& s) {
  return memory_height() + (is_run(s) ? loss_height() + time_height(s) : 0);
}

// The measured memory of the replica with the largest peak in this phase.
const Memory* measured_max(const PhaseRecord& p) {
  const Memory* best = nullptr;
  for (const Memory& m : p.measured)
    if (!best || m.peak > best->peak) best = &m;
  return best;
}

void text(std::ostream& out, double x, double y, const std::string& s, const char* anchor = "start",
          int size = 12) {
  out << fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-family=\"sans-serif\" font-size=\"{}\" "
      "text-anchor=\"{}\">{}</text>\n",
      x, y, size, anchor, escape(s));
}

void rect(std::ostream& out, double x, double y, double w, double h, const char* fill) {
  out << fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", x, y, w,
      h, fill);
}

void line(std::ostream& out, double x1, double y1, double x2, double y2, const char* stroke) {
  out << fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"/>\n", x1, y1, x2,
      y2, stroke);
}

void memory_panel(std::ostream& out, const Source& s, int top) {
  text(out, kLeft, top + 18,
       fmt::format("{}: device memory per replica by phase{}", s.file,
                   is_run(s) ? " (left planned, right measured)" : " (planned)"),
       "start", 14);
  const int plot_top = top + kTitleHeight + kLegendHeight;
  const int plot_bottom = plot_top + kMemoryPlot;
  std::uint64_t max_bytes = 1;
  for (const PhaseRecord& p : s.record.phases) {
    max_bytes = std::max(max_bytes, p.planned.peak);
    for (const Memory& m : p.measured) max_bytes = std::max(max_bytes, m.peak);
  }
  const double scale = kMemoryPlot / static_cast<double>(max_bytes);
  line(out, kLeft, plot_bottom, kWidth - kRight, plot_bottom, "#333333");
  line(out, kLeft, plot_top, kLeft, plot_bottom, "#333333");
  text(out, kLeft - 6, plot_bottom + 4, "0 B", "end", 11);
  text(out, kLeft - 6, plot_top + 4, format_bytes(max_bytes), "end", 11);
  const std::size_t n = std::max<std::size_t>(s.record.phases.size(), 1);
  const double slot = (kWidth - kLeft - kRight) / static_cast<double>(n);
  const bool run = is_run(s);
  const double bar = run ? slot * 0.35 : slot * 0.6;
  auto stack = [&](double x, const Memory& m, const char* always, const char* rest) {
    const double h_always = static_cast<double>(m.always_live) * scale;
    const double h_rest = static_cast<double>(m.not_always_live) * scale;
    rect(out, x, plot_bottom - h_always, bar, h_always, always);
    rect(out, x, plot_bottom - h_always - h_rest, bar, h_rest, rest);
  };
  for (std::size_t i = 0; i < s.record.phases.size(); ++i) {
    const PhaseRecord& p = s.record.phases[i];
    const double x0 =
        kLeft + slot * static_cast<double>(i) + (slot - (run ? 2 * bar + 4 : bar)) / 2;
    stack(x0, p.planned, kPlannedAlways, kPlannedRest);
    if (const Memory* m = run ? measured_max(p) : nullptr) {
      stack(x0 + bar + 4, *m, kMeasuredAlways, kMeasuredRest);
    }
    const double cx = kLeft + slot * (static_cast<double>(i) + 0.5);
    out << fmt::format(
        "<text x=\"{0:.1f}\" y=\"{1}\" font-family=\"sans-serif\" font-size=\"11\" "
        "text-anchor=\"end\" transform=\"rotate(-35 {0:.1f} {1})\">{2}</text>\n",
        cx, plot_bottom + 14, escape(short_label(p.name)));
  }
  // Legend, one row under the title.
  const int ly = top + kTitleHeight - 4;
  const std::vector<std::pair<const char*, const char*>> items =
      run ? std::vector<std::pair<const char*, const char*>>{{kPlannedAlways,
                                                              "planned always-live"},
                                                             {kPlannedRest,
                                                              "planned not-always-live"},
                                                             {kMeasuredAlways,
                                                              "measured always-live"},
                                                             {kMeasuredRest,
                                                              "measured not-always-live"}}
          : std::vector<std::pair<const char*, const char*>>{
                {kPlannedAlways, "planned always-live"}, {kPlannedRest, "planned not-always-live"}};
  for (std::size_t i = 0; i < items.size(); ++i) {
    const double lx = kLeft + 160.0 * static_cast<double>(i);
    rect(out, lx, ly, 10, 10, items[i].first);
    text(out, lx + 14, ly + 9, items[i].second, "start", 10);
  }
}

void loss_panel(std::ostream& out, const Source& s, int top) {
  const std::vector<double>& loss = s.record.loss;
  text(out, kLeft, top + 18, fmt::format("{}: training loss per step", s.file), "start", 14);
  const int plot_top = top + kTitleHeight;
  const int plot_bottom = plot_top + kLossPlot;
  line(out, kLeft, plot_bottom, kWidth - kRight, plot_bottom, "#333333");
  line(out, kLeft, plot_top, kLeft, plot_bottom, "#333333");
  if (loss.empty()) {
    text(out, kLeft + 10, plot_top + 20, "no steps recorded", "start", 11);
    return;
  }
  const auto [lo_it, hi_it] = std::minmax_element(loss.begin(), loss.end());
  const double lo = std::min(0.0, *lo_it);
  const double hi = *hi_it > lo ? *hi_it : lo + 1.0;
  text(out, kLeft - 6, plot_bottom + 4, fmt::format("{:.3g}", lo), "end", 11);
  text(out, kLeft - 6, plot_top + 4, fmt::format("{:.3g}", hi), "end", 11);
  text(out, kLeft, plot_bottom + 16, "1", "middle", 11);
  text(out, kWidth - kRight, plot_bottom + 16, fmt::format("{}", loss.size()), "middle", 11);
  text(out, (kLeft + kWidth - kRight) / 2.0, plot_bottom + 32, "optimizer step", "middle", 11);
  const double width = kWidth - kLeft - kRight;
  std::string points;
  for (std::size_t i = 0; i < loss.size(); ++i) {
    const double x = kLeft + (loss.size() == 1 ? 0.0
                                               : width * static_cast<double>(i) /
                                                     static_cast<double>(loss.size() - 1));
    const double y = plot_bottom - (loss[i] - lo) / (hi - lo) * kLossPlot;
    points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x, y);
  }
  out << "<polyline fill=\"none\" stroke=\"#b35900\" stroke-width=\"1.5\" points=\"" << points
      << "\"/>\n";
}

void time_panel(std::ostream& out, const Source& s, int top) {
  text(out, kLeft, top + 18,
       fmt::format("{}: time per optimizer step by phase (planned, measured)", s.file), "start",
       14);
  double max_seconds = 0.0;
  for (const PhaseRecord& p : s.record.phases) {
    max_seconds = std::max({max_seconds, p.planned_seconds, p.measured_seconds});
  }
  const int label_width = 230;
  const double x0 = kLeft + label_width;
  const double width = kWidth - kRight - x0 - 70;
  const double scale = max_seconds > 0 ? width / max_seconds : 0.0;
  for (std::size_t i = 0; i < s.record.phases.size(); ++i) {
    const PhaseRecord& p = s.record.phases[i];
    const double y = top + kTitleHeight + kTimeRow * static_cast<double>(i);
    text(out, x0 - 6, y + 15, p.name, "end", 11);
    rect(out, x0, y + 2, p.planned_seconds * scale, 9, kPlannedRest);
    rect(out, x0, y + 12, p.measured_seconds * scale, 9, kMeasuredRest);
    text(out, x0 + p.measured_seconds * scale + 4, y + 20, format_seconds(p.measured_seconds),
         "start", 10);
  }
}

}  // namespace

ChartSize chart_size(const std::vector<Source>& sources) {
  int height = 0;
  for (const Source& s : sources) height += block_height(s);
  return ChartSize{kWidth, std::max(height, 1)};
}

void write_chart(const std::vector<Source>& sources, std::ostream& out) {
  const ChartSize size = chart_size(sources);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\">\n",
      size.width, size.height);
  rect(out, 0, 0, size.width, size.height, "#ffffff");
  int top = 0;
  for (const Source& s : sources) {
    memory_panel(out, s, top);
    top += memory_height();
    if (is_run(s)) {
      loss_panel(out, s, top);
      top += loss_height();
      time_panel(out, s, top);
      top += time_height(s);
    }
  }
  out << "</svg>\n";
}

void write_chart_file(const std::vector<Source>& sources, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("{}: cannot open for writing", path);
  write_chart(sources, out);
  out.flush();
  if (!out) throw Error("{}: write failed", path);
}

}  // namespace popkit::reports
