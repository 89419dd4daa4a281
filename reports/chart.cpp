#include "reports/chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <ostream>
#include <sstream>
#include <utility>
#include <vector>

#include "base/error.h"
#include "reports/memory_report.h"
#include "reports/svg.h"

namespace popkit::reports {

namespace {

using svg::AxisUnit;

constexpr int kWidth = 800;
constexpr int kLeft = 80;  // the y title and the tick labels
constexpr int kRight = 20;
constexpr int kMargin = 10;
constexpr int kTitleSize = 14;
constexpr int kNoteSize = 11;
constexpr int kLabelSize = 11;
constexpr int kLegendSize = 10;
constexpr int kPlot = 200;              // plot height
constexpr int kMaxCategoryLabel = 220;  // px of a rotated phase name, at most
constexpr double kLabelAngle = 35.0;    // degrees

constexpr const char* kAxis = "#333333";
constexpr const char* kGrid = "#dddddd";
constexpr const char* kPlannedRest = "#8fb8de";
constexpr const char* kMeasuredRest = "#f5b26b";

bool is_run(const Source& s) {
  return s.kind == SourceKind::kRun;
}

// The measured memory of the replica with the largest peak in this phase.
const Memory* measured_max(const PhaseRecord& p) {
  const Memory* best = nullptr;
  for (const Memory& m : p.measured)
    if (!best || m.peak > best->peak) best = &m;
  return best;
}

struct LegendItem {
  std::string colour;
  std::string label;
};

// A panel drawn at y = 0 in its own coordinates; `height` says how far it reaches.
struct Panel {
  std::ostringstream body;
  int height = 0;
};

// Title (fitted), notes (fitted), then a legend that wraps: returns the y below them.
int header(std::ostream& out, const std::string& title, const std::vector<std::string>& notes,
           const std::vector<LegendItem>& legend) {
  const double room = kWidth - 2 * kMargin;
  svg::text(out, kMargin, 18, svg::fit(title, room, kTitleSize), "start", kTitleSize);
  int y = 30;
  for (const std::string& note : notes) {
    svg::text(out, kMargin, y + 11, svg::fit(note, room, kNoteSize), "start", kNoteSize);
    y += 15;
  }
  double x = kLeft;
  if (!legend.empty()) y += 4;
  for (const LegendItem& item : legend) {
    const std::string label = svg::fit(item.label, room - kLeft, kLegendSize);
    const double w = 14 + svg::text_width(label, kLegendSize) + 16;
    if (x + w > kWidth - kRight && x > kLeft) {
      x = kLeft;
      y += 16;
    }
    svg::rect(out, x, y, 10, 10, item.colour);
    svg::text(out, x + 14, y + 9, label, "start", kLegendSize);
    x += w;
  }
  return y + (legend.empty() ? 0 : 16) + 10;
}

// The y axis from 0 (or below) to the last tick: gridlines, tick labels, the title
// rotated along it. Returns the value at the top of the plot.
double y_axis(std::ostream& out, int plot_top, int plot_bottom, const std::vector<double>& ticks,
              const std::string& title) {
  const double lo = ticks.front();
  const double hi = ticks.back();
  for (const double t : ticks) {
    const double y = plot_bottom - (t - lo) / (hi - lo) * (plot_bottom - plot_top);
    svg::line(out, kLeft, y, kWidth - kRight, y, t == lo ? kAxis : kGrid);
    svg::text(out, kLeft - 6, y + 4, svg::tick_label(t), "end", kLabelSize);
  }
  svg::line(out, kLeft, plot_top, kLeft, plot_bottom, kAxis);
  const double cy = (plot_top + plot_bottom) / 2.0;
  svg::text(out, 16, cy, svg::fit(title, plot_bottom - plot_top, kLabelSize), "middle", kLabelSize,
            fmt::format(" transform=\"rotate(-90 16 {:.1f})\"", cy).c_str());
  return hi;
}

// One series of bars. `layers`, when given, stack from the bottom of each bar in their
// colours (memory by class), and `outlined` frames each bar (measured beside planned).
struct BarLayer {
  std::string colour;
  std::vector<double> values;  // per category
};
struct BarSeries {
  std::string colour;
  std::vector<double> values;  // per category, in the axis's base unit; < 0: no bar
  std::vector<BarLayer> layers;
  bool outlined = false;
};

void bar_panel(Panel& p, const std::string& title, std::vector<std::string> notes,
               const std::vector<LegendItem>& legend, const std::vector<std::string>& categories,
               const std::vector<BarSeries>& series, const AxisUnit& unit,
               const std::string& y_title, const std::string& x_title) {
  std::ostream& out = p.body;
  const int plot_top = header(out, title, notes, legend);
  const int plot_bottom = plot_top + kPlot;
  double max_value = 0.0;
  for (const BarSeries& s : series)
    for (const double v : s.values) max_value = std::max(max_value, v / unit.divisor);
  const std::vector<double> ticks = svg::nice_ticks(0.0, max_value);
  const double top_value = y_axis(out, plot_top, plot_bottom, ticks, y_title);
  const double scale = kPlot / top_value / unit.divisor;
  const std::size_t n = std::max<std::size_t>(categories.size(), 1);
  const double slot = (kWidth - kLeft - kRight) / static_cast<double>(n);
  const double group = slot * 0.8;
  const double bar = group / static_cast<double>(std::max<std::size_t>(series.size(), 1));
  const double angle = kLabelAngle * 3.14159265358979 / 180.0;
  double label_depth = 0.0;
  for (std::size_t c = 0; c < categories.size(); ++c) {
    const double x0 = kLeft + slot * static_cast<double>(c) + (slot - group) / 2;
    for (std::size_t k = 0; k < series.size(); ++k) {
      const BarSeries& s = series[k];
      const double v = c < s.values.size() ? s.values[c] : -1.0;
      if (v < 0) continue;
      const double x = x0 + bar * static_cast<double>(k);
      const double w = std::max(bar - 2.0, 1.0);
      if (s.layers.empty()) svg::rect(out, x, plot_bottom - v * scale, w, v * scale, s.colour);
      double below = 0.0;
      for (const BarLayer& layer : s.layers) {
        const double h = c < layer.values.size() ? layer.values[c] : 0.0;
        svg::rect(out, x, plot_bottom - (below + h) * scale, w, h * scale, layer.colour);
        below += h;
      }
      if (s.outlined)
        out << fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
            "stroke=\"{}\" stroke-width=\"1.5\"/>\n",
            x, plot_bottom - v * scale, w, v * scale, kAxis);
    }
    // A rotated label ends under its group and runs left and down: it may be no longer
    // than the room to its left, or it leaves the picture.
    const double cx = kLeft + slot * (static_cast<double>(c) + 0.5);
    const double room = std::min<double>(kMaxCategoryLabel, (cx - 2) / std::cos(angle));
    const std::string label = svg::fit(categories[c], room, kLabelSize);
    label_depth = std::max(label_depth, svg::text_width(label, kLabelSize) * std::sin(angle));
    svg::text(out, cx, plot_bottom + 14, label, "end", kLabelSize,
              fmt::format(" transform=\"rotate(-{} {:.1f} {})\"", kLabelAngle, cx, plot_bottom + 14)
                  .c_str());
  }
  const int x_title_y = plot_bottom + 14 + static_cast<int>(std::ceil(label_depth)) + 16;
  svg::text(out, (kLeft + kWidth - kRight) / 2.0, x_title_y, x_title, "middle", kLabelSize);
  p.height = x_title_y + kMargin;
}

struct LineSeries {
  std::string colour;
  std::vector<double> ys;       // at x = first_step + 1, first_step + 2, ...
  std::int64_t first_step = 0;  // a resumed run whose run file lacks the earlier steps
};

void line_panel(Panel& p, const std::string& title, const std::vector<std::string>& notes,
                const std::vector<LegendItem>& legend, const std::vector<LineSeries>& series,
                const std::string& x_title, const std::string& y_title) {
  std::ostream& out = p.body;
  const int plot_top = header(out, title, notes, legend);
  const int plot_bottom = plot_top + kPlot;
  double lo = 0.0;
  double hi = 0.0;
  std::size_t n = 1;
  for (const LineSeries& s : series) {
    n = std::max(n, static_cast<std::size_t>(s.first_step) + s.ys.size());
    for (const double y : s.ys) {
      if (!std::isfinite(y)) continue;
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
  }
  const std::vector<double> y_ticks = svg::nice_ticks(lo, hi);
  y_axis(out, plot_top, plot_bottom, y_ticks, y_title);
  const double y_lo = y_ticks.front();
  const double y_hi = y_ticks.back();
  const std::vector<double> x_ticks = svg::nice_ticks(0.0, static_cast<double>(n));
  const double x_hi = x_ticks.back();
  const double plot_w = kWidth - kLeft - kRight;
  const auto x_of = [&](double step) { return kLeft + step / x_hi * plot_w; };
  for (const double t : x_ticks) {
    svg::line(out, x_of(t), plot_bottom, x_of(t), plot_bottom + 4, kAxis);
    svg::text(out, x_of(t), plot_bottom + 16, svg::tick_label(t), "middle", kLabelSize);
  }
  for (const LineSeries& s : series) {
    std::string points;
    for (std::size_t i = 0; i < s.ys.size(); ++i) {
      if (!std::isfinite(s.ys[i])) continue;
      const double y = plot_bottom - (s.ys[i] - y_lo) / (y_hi - y_lo) * kPlot;
      points +=
          fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ",
                      x_of(static_cast<double>(s.first_step) + static_cast<double>(i + 1)), y);
    }
    out << "<polyline fill=\"none\" stroke=\"" << s.colour << "\" stroke-width=\"1.5\" points=\""
        << points << "\"/>\n";
  }
  svg::text(out, (kLeft + kWidth - kRight) / 2.0, plot_bottom + 34, x_title, "middle", kLabelSize);
  p.height = plot_bottom + 34 + kMargin;
}

std::string label_of(const std::vector<Source>& sources, const std::vector<std::string>& names,
                     std::size_t i) {
  return i < names.size() ? names[i] : sources[i].file;
}

// The phase names of all sources, in order of first appearance.
std::vector<std::string> phase_names(const std::vector<const Source*>& sources) {
  std::vector<std::string> names;
  for (const Source* s : sources)
    for (const PhaseRecord& p : s->record.phases)
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
  return names;
}

double phase_value(const Source& s, const std::string& phase, double (*value)(const PhaseRecord&)) {
  for (const PhaseRecord& p : s.record.phases)
    if (p.name == phase) return value(p);
  return -1.0;
}

// memory: one source, per phase a bar of the planned peak (and, framed beside it, the
// largest replica's measured one), each stacked by tensor class as at the peak.
void memory_panel(Panel& p, const Source& s, const std::string& label) {
  const bool run = is_run(s);
  const auto& classes = memory_classes();
  std::vector<std::string> categories;
  BarSeries planned{"", {}, {}, false};
  BarSeries measured{"", {}, {}, true};
  for (std::size_t k = 0; k < classes.size(); ++k) {
    planned.layers.push_back({svg::series_colour(k), {}});
    measured.layers.push_back({svg::series_colour(k), {}});
  }
  const auto add = [&](BarSeries& bars, const Memory* m) {
    bars.values.push_back(m ? static_cast<double>(m->peak) : -1.0);
    for (std::size_t k = 0; k < classes.size(); ++k)
      bars.layers[k].values.push_back(
          m ? static_cast<double>(m->by_class[static_cast<std::size_t>(classes[k].first)]) : 0.0);
  };
  double max_bytes = 0.0;
  for (const PhaseRecord& ph : s.record.phases) {
    categories.push_back(ph.name);
    add(planned, &ph.planned);
    max_bytes = std::max(max_bytes, static_cast<double>(ph.planned.peak));
    const Memory* m = measured_max(ph);
    add(measured, m);
    if (m) max_bytes = std::max(max_bytes, static_cast<double>(m->peak));
  }
  std::vector<LegendItem> legend;
  for (std::size_t k = 0; k < classes.size(); ++k)
    legend.push_back({svg::series_colour(k), classes[k].second});
  std::vector<BarSeries> series = {planned};
  std::vector<std::string> notes;
  if (run) {
    series.push_back(measured);
    notes.push_back("per phase: planned, then measured (framed; the largest replica)");
  }
  const AxisUnit unit = svg::bytes_unit(max_bytes);
  bar_panel(p, fmt::format("{}: device memory per replica by phase and class", label), notes,
            legend, categories, series, unit, fmt::format("memory per replica ({})", unit.name),
            "phase");
}

// Time per optimizer step by phase across `sources`, only those timed like the first:
// the others are named in a note, with why.
void time_panel(Panel& p, const std::vector<const Source*>& sources,
                const std::vector<std::string>& labels) {
  if (sources.empty()) return;
  const std::string basis = time_basis(*sources.front());
  std::vector<const Source*> kept;
  std::vector<std::string> kept_labels;
  std::vector<std::string> notes;
  std::vector<std::string> left_out;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (timed_device(*sources[i]) == timed_device(*sources.front())) {
      kept.push_back(sources[i]);
      kept_labels.push_back(labels[i]);
    } else {
      left_out.push_back(fmt::format("{} ({})", labels[i], time_basis(*sources[i])));
    }
  }
  // A run's own plan estimates its time on the plan's device; drawn beside the
  // measurement only when that device is a CPU.
  const bool planned_beside = std::all_of(kept.begin(), kept.end(), [](const Source* s) {
    return is_run(*s) && s->record.plan.device_kind == "cpu";
  });
  if (!left_out.empty()) {
    std::string list;
    for (const std::string& l : left_out) list += (list.empty() ? "" : ", ") + l;
    notes.push_back(fmt::format("not drawn, since their times are not {}: {}", basis, list));
  }
  if (is_run(*kept.front()) && !planned_beside) {
    notes.push_back(
        fmt::format("the plan's estimates are for {}, so they are not drawn against these CPU "
                    "measurements",
                    kept.front()->record.plan.device_profile));
  }
  const std::vector<std::string> categories = phase_names(kept);
  std::vector<BarSeries> series;
  std::vector<LegendItem> legend;
  double max_seconds = 0.0;
  const bool one = kept.size() == 1;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const Source& s = *kept[i];
    const auto seconds = is_run(s) ? +[](const PhaseRecord& ph) { return ph.measured_seconds; }
                                   : +[](const PhaseRecord& ph) { return ph.planned_seconds; };
    BarSeries b{one ? std::string(kMeasuredRest) : svg::series_colour(i), {}, {}, false};
    if (one && !is_run(s)) b.colour = kPlannedRest;
    for (const std::string& c : categories) {
      b.values.push_back(phase_value(s, c, seconds));
      max_seconds = std::max(max_seconds, b.values.back());
    }
    if (planned_beside) {
      BarSeries planned{one ? std::string(kPlannedRest) : std::string("#bbbbbb"), {}, {}, false};
      for (const std::string& c : categories) {
        planned.values.push_back(
            phase_value(s, c, [](const PhaseRecord& ph) { return ph.planned_seconds; }));
        max_seconds = std::max(max_seconds, planned.values.back());
      }
      series.push_back(planned);
      legend.push_back({planned.colour, kept_labels[i] + " planned"});
    }
    series.push_back(b);
    legend.push_back(
        {b.colour, fmt::format("{} {}", kept_labels[i], is_run(s) ? "measured" : "estimated")});
  }
  const AxisUnit unit = svg::seconds_unit(max_seconds);
  bar_panel(p, fmt::format("time per optimizer step by phase ({})", basis), notes, legend,
            categories, series, unit, fmt::format("time per step ({})", unit.name), "phase");
}

// A resumed run's curves cover the whole run (the earlier run's steps first); say where
// it resumed, and which steps its run file lacks when it found no earlier run file.
std::vector<std::string> resume_notes(const std::vector<const Source*>& runs,
                                      const std::vector<std::string>& labels) {
  std::vector<std::string> notes;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i]->record;
    if (!r.resumed_from) continue;
    const std::string who = runs.size() > 1 ? labels[i] + ": " : std::string();
    notes.push_back(r.first_step > 0
                        ? fmt::format("{}resumed at step {}; steps 1-{} are not in its run file",
                                      who, r.resumed_from->step, r.first_step)
                        : fmt::format("{}resumed at step {}, the earlier steps from {}", who,
                                      r.resumed_from->step, r.resumed_from->run_file));
  }
  return notes;
}

// `who`: the run's name in the title, when the panel draws one run of several.
void loss_panel(Panel& p, const std::vector<const Source*>& runs,
                const std::vector<std::string>& labels, const std::string& who = "") {
  std::vector<LineSeries> series;
  std::vector<LegendItem> legend;
  bool evaluated = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i]->record;
    series.push_back({svg::series_colour(i), r.loss, r.first_step});
    legend.push_back({svg::series_colour(i), runs.size() > 1 ? labels[i] : "training loss"});
    if (r.evaluations.empty()) continue;
    // The test loss after each evaluated epoch: a line through those steps alone.
    LineSeries test{svg::series_colour(runs.size() + i), {}, 0};
    for (const Evaluation& e : r.evaluations) {
      test.ys.resize(static_cast<std::size_t>(e.step), std::nan(""));
      test.ys.back() = e.result.loss;
    }
    series.push_back(std::move(test));
    legend.push_back({svg::series_colour(runs.size() + i),
                      runs.size() > 1 ? labels[i] + ": test loss" : "test loss"});
    evaluated = true;
  }
  line_panel(p,
             (who.empty() ? "" : who + ": ") +
                 (evaluated ? "loss per optimizer step, and on the test set after evaluated epochs"
                            : "training loss per optimizer step"),
             resume_notes(runs, labels), legend, series, "optimizer step", "loss");
}

void samples_panel(Panel& p, const std::vector<const Source*>& runs,
                   const std::vector<std::string>& labels) {
  std::vector<LineSeries> series;
  std::vector<LegendItem> legend;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    LineSeries s{svg::series_colour(i), {}, runs[i]->record.first_step};
    const auto batch = static_cast<double>(runs[i]->record.plan.global_batch_size);
    for (const double t : runs[i]->record.step_seconds)
      s.ys.push_back(t > 0 ? batch / t : std::nan(""));
    series.push_back(std::move(s));
    legend.push_back({svg::series_colour(i), labels[i]});
  }
  line_panel(p, "throughput per optimizer step (measured on this CPU)", resume_notes(runs, labels),
             legend, series, "optimizer step", "samples/s");
}

// compare: the peak memory of each phase, one bar per source. Memory compares across
// plans and runs: a run allocates exactly what its plan lists.
void peak_panel(Panel& p, const std::vector<const Source*>& sources,
                const std::vector<std::string>& labels) {
  const std::vector<std::string> categories = phase_names(sources);
  std::vector<BarSeries> series;
  std::vector<LegendItem> legend;
  double max_bytes = 0.0;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Source& s = *sources[i];
    BarSeries b{svg::series_colour(i), {}, {}, false};
    for (const std::string& c : categories) {
      const double v = phase_value(s, c, is_run(s) ? +[](const PhaseRecord& ph) {
        const Memory* m = measured_max(ph);
        return m ? static_cast<double>(m->peak) : -1.0;
      } : +[](const PhaseRecord& ph) { return static_cast<double>(ph.planned.peak); });
      b.values.push_back(v);
      max_bytes = std::max(max_bytes, v);
    }
    series.push_back(std::move(b));
    legend.push_back({svg::series_colour(i),
                      fmt::format("{} ({})", labels[i], is_run(s) ? "measured" : "planned")});
  }
  const AxisUnit unit = svg::bytes_unit(max_bytes);
  bar_panel(p, "peak device memory per replica by phase", {}, legend, categories, series, unit,
            fmt::format("peak per replica ({})", unit.name), "phase");
}

std::vector<Panel> panels(const std::vector<Source>& sources, ChartKind kind,
                          const std::vector<std::string>& names) {
  std::vector<Panel> out;
  std::vector<const Source*> all;
  std::vector<std::string> all_labels;
  std::vector<const Source*> runs;
  std::vector<std::string> run_labels;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    all.push_back(&sources[i]);
    all_labels.push_back(label_of(sources, names, i));
    if (is_run(sources[i])) {
      runs.push_back(&sources[i]);
      run_labels.push_back(all_labels.back());
    }
  }
  const auto add = [&](auto draw) {
    out.emplace_back();
    draw(out.back());
  };
  switch (kind) {
    case ChartKind::kMemory:
      for (std::size_t i = 0; i < sources.size(); ++i)
        add([&](Panel& p) { memory_panel(p, sources[i], all_labels[i]); });
      break;
    case ChartKind::kThroughput:
      add([&](Panel& p) { time_panel(p, all, all_labels); });
      if (!runs.empty()) add([&](Panel& p) { samples_panel(p, runs, run_labels); });
      // A run's curves: its loss, and each run's alone (compare overlays them).
      for (std::size_t i = 0; i < runs.size(); ++i)
        add([&](Panel& p) {
          loss_panel(p, {runs[i]}, {run_labels[i]}, runs.size() > 1 ? run_labels[i] : "");
        });
      break;
    case ChartKind::kCompare:
      add([&](Panel& p) { peak_panel(p, all, all_labels); });
      // Runs first: their times are measured, and plans of another device are named.
      {
        std::vector<const Source*> timed = runs;
        std::vector<std::string> timed_labels = run_labels;
        for (std::size_t i = 0; i < sources.size(); ++i)
          if (!is_run(sources[i])) {
            timed.push_back(&sources[i]);
            timed_labels.push_back(all_labels[i]);
          }
        add([&](Panel& p) { time_panel(p, timed, timed_labels); });
      }
      if (!runs.empty()) add([&](Panel& p) { loss_panel(p, runs, run_labels); });
      break;
  }
  return out;
}

}  // namespace

ChartSize chart_size(const std::vector<Source>& sources, ChartKind kind,
                     const std::vector<std::string>& names) {
  int height = 0;
  for (const Panel& p : panels(sources, kind, names)) height += p.height;
  return ChartSize{kWidth, std::max(height, 1)};
}

void write_chart(const std::vector<Source>& sources, ChartKind kind, std::ostream& out,
                 const std::vector<std::string>& names) {
  const std::vector<Panel> drawn = panels(sources, kind, names);
  int height = 0;
  for (const Panel& p : drawn) height += p.height;
  height = std::max(height, 1);
  svg::open(out, kWidth, height);
  int top = 0;
  for (const Panel& p : drawn) {
    out << fmt::format("<g transform=\"translate(0 {})\">\n", top) << p.body.str() << "</g>\n";
    top += p.height;
  }
  out << "</svg>\n";
}

void write_chart_file(const std::vector<Source>& sources, ChartKind kind, const std::string& path,
                      const std::vector<std::string>& names) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("{}: cannot open for writing", path);
  write_chart(sources, kind, out, names);
  out.flush();
  if (!out) throw Error("{}: write failed", path);
}

}  // namespace popkit::reports
