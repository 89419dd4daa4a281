// A file popreport reads: a plan file (planner::plan_from_json) or a run file
// (run_record_from_json), brought to one model. A plan becomes a RunRecord with only
// its planned figures, so every table is built once and plan rows show estimates where
// run rows show measurements.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "planner/plan_json.h"
#include "reports/run_record.h"

namespace popkit::reports {

enum class SourceKind { kPlan, kRun };

struct Source {
  std::string file;
  std::string name;  // the file's stem: "runs/rts.json" -> "rts"
  SourceKind kind = SourceKind::kRun;
  RunRecord record;
};

// Throws InputError naming the file (and the field): not JSON, `kind` neither "plan"
// nor "run", a newer version, a missing or ill-typed field. The splits: those `json` was
// parsed with, if any.
Source source_from_json(const nlohmann::json& json, const std::string& filename,
                        planner::PlanSplit* plan_split = nullptr, RunSplit* run_split = nullptr);
// A plan or run file's text, parsed once with both splits.
Source source_from_text(std::string_view text, const std::string& filename);
// The file as source_from_text reads its text, or a run folder's run.json; the text is
// released before the plan is built, so memory peaks near twice the file (the text, then
// the plan's structs).
Source load_source(const std::string& path);
std::vector<Source> load_sources(const std::vector<std::string>& filenames);

// Whole-program figures of a source, per replica: the planned ones for a plan, the
// measured ones (the largest over replicas) for a run.
std::uint64_t peak_memory(const Source& source);
std::uint64_t streaming_memory(const Source& source);
// What a source's times are. A run's are measured on this CPU; a plan's are estimates
// for its device profile, and those of a CPU's profile (`poprun calibrate`'s, or the
// built-in cpu) estimate what poprun measures. Times compare only between sources of the
// same device: an estimate for an IPU against a CPU measurement measures neither.
std::string timed_device(const Source& source);  // "CPU", or the plan's profile name
// "measured on CPU", "estimate for CPU (cpu-calibrated)", "estimate for ipu-mk2".
std::string time_basis(const Source& source);

double samples_per_second(const Source& source);  // a run's median
double step_seconds(const Source& source);        // a run's median after warm-up

}  // namespace popkit::reports
