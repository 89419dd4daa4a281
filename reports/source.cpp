#include "reports/source.h"

#include <algorithm>
#include <filesystem>

#include "planner/plan_json.h"
#include "reports/input_error.h"
#include "reports/json_reader.h"

namespace popkit::reports {

Source source_from_json(const nlohmann::json& json, const std::string& filename,
                        planner::PlanSplit* plan_split, RunSplit* run_split) {
  const JsonReader top(json, filename);
  Source s;
  s.file = filename;
  s.name = std::filesystem::path(filename).stem().string();
  // Run files say `"kind": "run"`; plan files (the planner's format) have no kind.
  const std::string kind = top.has("kind") ? top.string("kind") : "plan";
  if (kind == "run") {
    s.kind = SourceKind::kRun;
    s.record = run_record_from_json(json, filename, run_split);
    return s;
  }
  if (kind != "plan") {
    top.fail(
        "kind",
        fmt::format("\"{}\" is neither a plan nor a run file (want \"plan\" or \"run\")", kind));
  }
  s.kind = SourceKind::kPlan;
  try {
    s.record = record_from_plan(planner::plan_from_json(json, filename, plan_split));
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError("{}", e.what());
  }
  return s;
}

namespace {

// The plan split claims a plan's arrays, the run split a run's; their paths differ, so
// one parse serves either kind of file.
struct Splits {
  explicit Splits(const std::string& filename) : plan(filename), run(filename) {}
  planner::PlanSplit plan;
  RunSplit run;
};

// The run file in a run folder, as poprun names it (runner/run_dir.h: kRunFileName).
constexpr const char* kRunFolderFile = "run.json";

// A run folder (poprun's runs/<name>/<stamp>/ or --run-dir) stands for its run file.
std::string run_file_of(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  const std::filesystem::path file = std::filesystem::path(path) / kRunFolderFile;
  if (!std::filesystem::exists(file, ec))
    throw InputError(
        "{}: a folder without {}: give a plan or run file, or a run folder whose run has "
        "ended (a run writes {} at its end; its metrics.jsonl holds the steps so far)",
        path, kRunFolderFile, kRunFolderFile);
  return file.string();
}

}  // namespace

Source source_from_text(std::string_view text, const std::string& filename) {
  Splits splits(filename);
  const nlohmann::json dom = parse_input_json(text, filename, {&splits.plan, &splits.run});
  return source_from_json(dom, filename, &splits.plan, &splits.run);
}

Source load_source(const std::string& path) {
  const std::string filename = run_file_of(path);
  Splits splits(filename);
  std::string text = read_input_file(filename);
  const nlohmann::json dom = parse_input_json(text, filename, {&splits.plan, &splits.run});
  std::string().swap(text);
  return source_from_json(dom, filename, &splits.plan, &splits.run);
}

std::vector<Source> load_sources(const std::vector<std::string>& filenames) {
  std::vector<Source> sources;
  for (const std::string& f : filenames) sources.push_back(load_source(f));
  return sources;
}

std::uint64_t peak_memory(const Source& source) {
  if (source.kind == SourceKind::kPlan) return source.record.plan.peak_bytes;
  std::uint64_t peak = 0;
  for (const PhaseRecord& p : source.record.phases) {
    for (const Memory& m : p.measured) peak = std::max(peak, m.peak);
  }
  return peak;
}

std::uint64_t streaming_memory(const Source& source) {
  if (source.kind == SourceKind::kPlan) return source.record.streaming_planned;
  const auto& m = source.record.streaming_measured;
  return m.empty() ? 0 : *std::max_element(m.begin(), m.end());
}

double samples_per_second(const Source& source) {
  if (source.kind == SourceKind::kPlan) return source.record.plan.estimated_samples_per_second;
  return source.record.throughput.median;
}

double step_seconds(const Source& source) {
  if (source.kind == SourceKind::kPlan) return source.record.plan.estimated_step_seconds;
  const RunRecord& r = source.record;
  const auto warmup =
      static_cast<std::size_t>(std::max<std::int64_t>(r.throughput.warmup_steps, 0));
  if (r.step_seconds.size() <= warmup) return 0.0;
  return median(std::vector<double>(r.step_seconds.begin() + static_cast<std::ptrdiff_t>(warmup),
                                    r.step_seconds.end()));
}

std::string timed_device(const Source& source) {
  if (source.kind == SourceKind::kRun || source.record.plan.device_kind == "cpu") return "CPU";
  return source.record.plan.device_profile;
}

std::string time_basis(const Source& source) {
  if (source.kind == SourceKind::kRun) return "measured on CPU";
  const std::string& profile = source.record.plan.device_profile;
  if (timed_device(source) == "CPU" && profile != "cpu")
    return "estimate for CPU (" + profile + ")";
  return "estimate for " + profile;
}

}  // namespace popkit::reports
