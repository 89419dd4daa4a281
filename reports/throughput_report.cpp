#include "reports/throughput_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/units.h"

namespace popkit::reports {

namespace {

Cell rate_cell(double v) {
  return Cell{format_thousands(v, 1), v};
}
Cell seconds_cell(double v) {
  return Cell{format_seconds(v), v};
}
Cell count_cell(std::int64_t n) {
  return Cell{format_thousands(static_cast<double>(n)), static_cast<double>(n)};
}
Cell plain_cell(double v, int decimals) {
  return Cell{fmt::format("{:.{}f}", v, decimals), v};
}

// Every estimate is labelled with the device it is for: a run's plan priced for ipu-mk2
// stands beside what this CPU measured.
std::string planned_header(const Source& s) {
  return fmt::format("Planned ({})", s.record.plan.device_profile);
}
constexpr const char* kMeasuredHeader = "Measured (CPU)";

Table summary_table(const Source& s) {
  const bool run = s.kind == SourceKind::kRun;
  const RunRecord& r = s.record;
  Table t;
  t.key = "throughput";
  t.title = fmt::format(
      "Throughput: {} ({} {}, global batch {} = micro-batch {} x accumulation {} x "
      "{} replicas)",
      s.file, run ? "run" : "plan", r.plan.name, r.plan.global_batch_size, r.plan.micro_batch_size,
      r.plan.gradient_accumulation, r.plan.replication_factor);
  t.columns = {{"metric", "Metric", false}, {"planned", planned_header(s), true}};
  if (run) t.columns.push_back({"measured", kMeasuredHeader, true});
  auto add = [&](const std::string& metric, Cell planned, Cell measured) {
    std::vector<Cell> row{Cell{metric, {}}, std::move(planned)};
    if (run) row.push_back(std::move(measured));
    t.rows.push_back(std::move(row));
  };
  // poprun eval: a run that only evaluated has no training figures.
  const bool trained = !run || !r.phases.empty() || !r.eval;
  if (trained) {
    add("samples/s (median)", rate_cell(r.plan.estimated_samples_per_second),
        rate_cell(r.throughput.median));
    add("time per step (median)", seconds_cell(r.plan.estimated_step_seconds),
        seconds_cell(step_seconds(s)));
  }
  if (!run) return t;
  if (trained) {
    t.notes.push_back(fmt::format("{} steps, the first {} not counted (warm-up)",
                                  r.step_seconds.size(), r.throughput.warmup_steps));
    if (r.resumed_from)
      t.notes.push_back(
          r.first_step > 0
              ? fmt::format("resumed at step {} from {}, whose run file was not found: steps "
                            "1-{} are not counted",
                            r.resumed_from->step, r.resumed_from->checkpoint, r.first_step)
              : fmt::format("resumed at step {}: steps 1-{} are the earlier run's ({}), the "
                            "rest this run's",
                            r.resumed_from->step, r.resumed_from->step, r.resumed_from->run_file));
    add("samples/s (min)", Cell{}, rate_cell(r.throughput.min));
    add("samples/s (max)", Cell{}, rate_cell(r.throughput.max));
    double total = 0.0;
    for (double x : r.step_seconds) total += x;
    add("total step time", Cell{}, seconds_cell(total));
    if (r.pipeline) {
      // Planned: (S-1)/(GA+S-1), equal stages; estimated: with the cost model's stages.
      const auto percent = [](double v) { return Cell{fmt::format("{:.1f}%", v * 100.0), v}; };
      add("pipeline bubble", percent(r.pipeline->planned_bubble),
          percent(r.pipeline->measured_bubble));
      add("pipeline bubble (estimated)", percent(r.pipeline->estimated_bubble), Cell{});
    }
  }
  if (!r.loss.empty()) add("final training loss", Cell{}, plain_cell(r.loss.back(), 4));
  if (r.test) {
    add("test accuracy", Cell{},
        Cell{fmt::format("{:.2f}%", r.test->accuracy * 100.0), r.test->accuracy});
    add("test loss", Cell{}, plain_cell(r.test->loss, 4));
    add("test samples", Cell{}, count_cell(r.test->n_samples));
  }
  if (r.eval) {
    add("evaluation samples/s", rate_cell(r.eval->estimated_samples_per_second),
        rate_cell(r.eval->samples_per_second));
    add("evaluation time", Cell{}, seconds_cell(r.eval->seconds));
    t.notes.push_back(
        fmt::format("evaluation: the last of {}, {} samples in {} batches of {} (micro-batch {})",
                    r.eval->evaluations, r.eval->n_samples, r.eval->batches, r.eval->batch_size,
                    r.eval->micro_batch_size));
  }
  return t;
}

// The training plan's phases, or (eval) the evaluation plan's of a run that evaluated.
Table phase_table(const Source& s, bool eval) {
  const bool run = s.kind == SourceKind::kRun;
  const std::vector<PhaseRecord>& phases = eval ? s.record.eval->phases : s.record.phases;
  Table t;
  t.key = eval ? "eval_phase_times" : "phase_times";
  t.title = (eval ? "Time per evaluation batch by phase: " : "Time per optimizer step by phase: ") +
            s.file;
  // A pipelined run's stages run at once, each on a device of its own.
  const bool pipelined = s.record.pipeline.has_value();
  t.columns = {{"phase", "Phase", false}, {"planned", planned_header(s), true}};
  if (run) {
    t.columns.insert(t.columns.end(), {{"measured", kMeasuredHeader, true},
                                       {"compute", "Compute", true},
                                       {"collective", "Collective", true},
                                       {"remote", "Remote", true},
                                       {"host_io", "Host IO", true}});
    if (pipelined) t.columns.push_back({"pipeline", "Pipeline", true});
  }
  // A row: the phase's name, planned time and (a run) measured times.
  auto row_of = [&](const PhaseRecord& p) {
    std::vector<Cell> row{Cell{p.name, {}}, seconds_cell(p.planned_seconds)};
    if (run) {
      row.insert(
          row.end(),
          {seconds_cell(p.measured_seconds), seconds_cell(p.measured_by_kind.compute),
           seconds_cell(p.measured_by_kind.collective), seconds_cell(p.measured_by_kind.remote),
           seconds_cell(p.measured_by_kind.host_io)});
      if (pipelined) row.push_back(seconds_cell(p.measured_by_kind.pipeline));
    }
    return row;
  };
  PhaseRecord total;
  total.name = "total";
  for (const PhaseRecord& p : phases) {
    t.rows.push_back(row_of(p));
    total.planned_seconds += p.planned_seconds;
    total.measured_seconds += p.measured_seconds;
    total.measured_by_kind.compute += p.measured_by_kind.compute;
    total.measured_by_kind.collective += p.measured_by_kind.collective;
    total.measured_by_kind.remote += p.measured_by_kind.remote;
    total.measured_by_kind.host_io += p.measured_by_kind.host_io;
  }
  if (pipelined) {
    // Not a sum: the step is the plan's estimate, and about the longest stage measured.
    double longest = 0.0;
    for (const PhaseRecord& p : phases) longest = std::max(longest, p.measured_seconds);
    double planned_step = s.record.plan.estimated_step_seconds;
    if (eval) {
      const double rate = s.record.eval->estimated_samples_per_second;
      planned_step = rate > 0 ? static_cast<double>(s.record.eval->batch_size) / rate : 0.0;
    }
    std::vector<Cell> row{Cell{eval ? "batch (stages at once)" : "step (stages at once)", {}},
                          seconds_cell(planned_step)};
    if (run) {
      row.push_back(seconds_cell(longest));
      row.resize(t.columns.size());
    }
    t.rows.push_back(std::move(row));
  } else {
    t.rows.push_back(row_of(total));
  }
  if (run && pipelined)
    t.notes.push_back(fmt::format(
        "a pipelined run's stages run at once, each on its own device: a stage's measured "
        "time includes its waits for its neighbours (in Pipeline, with its sends and "
        "receives), and the {} takes about the longest stage's, not their sum",
        eval ? "batch" : "step"));
  if (run && !eval) {
    // A resumed run's phases were measured by its own process: the steps after the resume.
    const bool resumed = s.record.resumed_from.has_value();
    const std::int64_t steps_here =
        static_cast<std::int64_t>(s.record.step_seconds.size()) -
        (resumed ? std::max<std::int64_t>(0, s.record.resumed_from->step - s.record.first_step)
                 : 0);
    // The two figures answer different questions, and users read them as one.
    t.notes.push_back(fmt::format(
        "planned: an estimate for {}; measured: on this CPU, the mean per step over {} {} "
        "steps, warm-up included",
        s.record.plan.device_profile, resumed ? "this process's" : "all", steps_here));
    if (!pipelined)
      t.notes.push_back(fmt::format(
          "measured total {} against the median step time {}: the total is a mean over every "
          "step, warm-up and slow steps included, which a median leaves out, and a step also "
          "spends time between its phases",
          format_seconds(total.measured_seconds), format_seconds(step_seconds(s))));
  }
  return t;
}

Table bytes_table(const Source& s) {
  const bool run = s.kind == SourceKind::kRun;
  const RunRecord& r = s.record;
  Table t;
  t.key = "bytes_moved";
  t.title = "Bytes moved per replica per optimizer step: " + s.file;
  t.columns = {{"kind", "Kind", false}, {"planned", "Planned", true}};
  if (run) t.columns.push_back({"measured", "Measured", true});
  auto add = [&](const std::string& kind, std::uint64_t planned, std::uint64_t measured) {
    std::vector<Cell> row{Cell{kind, {}}, bytes_cell(planned)};
    if (run) row.push_back(bytes_cell(measured));
    t.rows.push_back(std::move(row));
  };
  add("host", r.bytes_planned.host, r.bytes_measured.host);
  add("remote", r.bytes_planned.remote, r.bytes_measured.remote);
  add("collective", r.bytes_planned.collective, r.bytes_measured.collective);
  return t;
}

}  // namespace

Report throughput_report(const std::vector<Source>& sources) {
  Report report;
  for (const Source& s : sources) {
    report.tables.push_back(summary_table(s));
    if (!s.record.phases.empty() || !s.record.eval) report.tables.push_back(phase_table(s, false));
    if (s.record.eval) report.tables.push_back(phase_table(s, true));
    if (!s.record.phases.empty() || !s.record.eval) report.tables.push_back(bytes_table(s));
  }
  return report;
}

}  // namespace popkit::reports
