#include "reports/memory_report.h"

#include <fmt/format.h>

#include "base/units.h"
#include "planner/names.h"

namespace popkit::reports {

// Keyed by the class's name in plan and run files; the table shows Workspace (the
// kernels' scratch) only when some phase has any.
const std::vector<std::pair<planner::TensorClass, std::string>>& memory_classes() {
  static const std::vector<std::pair<planner::TensorClass, std::string>> kClasses{
      {planner::TensorClass::kWeights, "Weights"},
      {planner::TensorClass::kGradAccumulators, "Grad accumulators"},
      {planner::TensorClass::kOptimizerState, "Optimizer state"},
      {planner::TensorClass::kActivations, "Activations"},
      {planner::TensorClass::kIoSlots, "IO slots"},
      {planner::TensorClass::kWorkspace, "Workspace"}};
  return kClasses;
}

namespace {

// measured - planned, taken without a signed type: byte counts use all 64 bits.
Cell diff_cell(std::uint64_t measured, std::uint64_t planned) {
  const double value = measured >= planned ? static_cast<double>(measured - planned)
                                           : -static_cast<double>(planned - measured);
  return Cell{format_byte_difference(measured, planned), value};
}

std::string kind_word(SourceKind k) {
  return k == SourceKind::kPlan ? "plan" : "run";
}

bool all_equal(const std::vector<Memory>& ms) {
  for (const Memory& m : ms) {
    if (m.peak != ms.front().peak || m.always_live != ms.front().always_live ||
        m.not_always_live != ms.front().not_always_live || m.by_class != ms.front().by_class) {
      return false;
    }
  }
  return true;
}

std::string source_title(const Source& s) {
  return fmt::format("{} ({} {}, {} replicas, {} execution)", s.file, kind_word(s.kind),
                     s.record.plan.name, s.record.plan.replication_factor,
                     s.record.plan.execution_mode);
}

std::uint64_t workspace_of(const Memory& m) {
  return m.by_class[static_cast<std::size_t>(planner::TensorClass::kWorkspace)];
}

bool any_workspace(const std::vector<PhaseRecord>& phases) {
  for (const PhaseRecord& ph : phases) {
    if (workspace_of(ph.planned) != 0) return true;
    for (const Memory& m : ph.measured)
      if (workspace_of(m) != 0) return true;
  }
  return false;
}

std::vector<Cell> memory_cells(const std::string& phase, const std::string& source, const Memory& m,
                               const Memory* planned, bool workspace) {
  std::vector<Cell> row{Cell{phase, {}}, Cell{source, {}}, bytes_cell(m.always_live),
                        bytes_cell(m.not_always_live), bytes_cell(m.peak)};
  if (planned) row.push_back(source == "planned" ? Cell{} : diff_cell(m.peak, planned->peak));
  for (const auto& [cls, title] : memory_classes())
    if (workspace || cls != planner::TensorClass::kWorkspace)
      row.push_back(bytes_cell(m.by_class[static_cast<std::size_t>(cls)]));
  return row;
}

// The training plan's phases, or (eval) the evaluation plan's of a run that evaluated.
Table phase_table(const Source& s, bool eval) {
  const bool run = s.kind == SourceKind::kRun;
  const std::vector<PhaseRecord>& phases = eval ? s.record.eval->phases : s.record.phases;
  Table t;
  t.key = eval ? "eval_memory" : "memory";
  t.title = fmt::format("Device memory per replica by {}phase: {}", eval ? "evaluation " : "",
                        source_title(s));
  const PlanSummary& p = s.record.plan;
  const std::uint64_t peak = eval ? s.record.eval->peak_bytes : p.peak_bytes;
  t.notes.push_back(fmt::format("device memory {} per replica; planned peak {} ({})",
                                format_bytes(p.memory_per_replica), format_bytes(peak),
                                peak <= p.memory_per_replica ? "fits" : "does not fit"));
  if (eval)
    t.notes.push_back(fmt::format("evaluation micro-batch {}, {} samples a batch",
                                  s.record.eval->micro_batch_size, s.record.eval->batch_size));
  t.columns = {{"phase", "Phase", false},
               {"source", "Source", false},
               {"always_live", "Always-live", true},
               {"not_always_live", "Not-always-live", true},
               {"peak", "Peak", true}};
  if (run) t.columns.push_back({"peak_vs_plan", "Δ peak", true});
  const bool workspace = any_workspace(phases);
  for (const auto& [cls, title] : memory_classes())
    if (workspace || cls != planner::TensorClass::kWorkspace)
      t.columns.push_back({std::string(planner::tensor_class_name(cls)), title, true});
  bool identical = true;
  for (const PhaseRecord& ph : phases) identical = identical && all_equal(ph.measured);
  const std::size_t n_replicas = run && !phases.empty() ? phases.front().measured.size() : 0;
  if (run && identical && n_replicas > 1) {
    t.notes.push_back(fmt::format("measured: identical on all {} replicas", n_replicas));
  }
  for (const PhaseRecord& ph : phases) {
    const Memory* planned = run ? &ph.planned : nullptr;
    t.rows.push_back(memory_cells(ph.name, "planned", ph.planned, planned, workspace));
    if (!run || ph.measured.empty()) continue;
    if (identical) {
      t.rows.push_back(memory_cells(ph.name, "measured", ph.measured.front(), planned, workspace));
    } else {
      for (std::size_t r = 0; r < ph.measured.size(); ++r) {
        t.rows.push_back(memory_cells(ph.name, fmt::format("measured r{}", r), ph.measured[r],
                                      planned, workspace));
      }
    }
  }
  return t;
}

Table streaming_table(const Source& s) {
  const bool run = s.kind == SourceKind::kRun;
  Table t;
  t.key = "streaming";
  t.title = "Streaming memory per replica: " + s.file;
  t.columns = {{"source", "Source", false}, {"bytes", "Streaming memory", true}};
  if (run) t.columns.push_back({"vs_plan", "Δ", true});
  const std::uint64_t planned = s.record.streaming_planned;
  std::vector<Cell> planned_row{Cell{"planned", {}}, bytes_cell(planned)};
  if (run) planned_row.emplace_back();
  t.rows.push_back(planned_row);
  if (!run) return t;
  const auto& m = s.record.streaming_measured;
  const bool identical =
      std::all_of(m.begin(), m.end(), [&](std::uint64_t b) { return b == m.front(); });
  for (std::size_t r = 0; r < m.size(); ++r) {
    t.rows.push_back({Cell{identical ? "measured" : fmt::format("measured r{}", r), {}},
                      bytes_cell(m[r]), diff_cell(m[r], planned)});
    if (identical) break;
  }
  return t;
}

}  // namespace

Report memory_report(const std::vector<Source>& sources) {
  Report report;
  for (const Source& s : sources) {
    // An evaluation-only run (poprun eval) has no training phases.
    if (!s.record.phases.empty() || !s.record.eval) report.tables.push_back(phase_table(s, false));
    if (s.record.eval) report.tables.push_back(phase_table(s, true));
    report.tables.push_back(streaming_table(s));
  }
  return report;
}

}  // namespace popkit::reports
