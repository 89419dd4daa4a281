#include "reports/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>

#include "base/units.h"
#include "config/device_profile.h"
#include "reports/input_error.h"

namespace popkit::reports {

namespace {

struct MetricInfo {
  Metric metric;
  const char* key;
};
constexpr std::array<MetricInfo, 4> kMetrics{{{Metric::kThroughput, "throughput"},
                                              {Metric::kExecutionTime, "execution_time"},
                                              {Metric::kPeakMemory, "peak_memory"},
                                              {Metric::kStreamingMemory, "streaming_memory"}}};

const char* metric_key(Metric m) {
  for (const MetricInfo& i : kMetrics)
    if (i.metric == m) return i.key;
  return "?";
}

// A row's figure as a person reads it; bytes from the row's own integer (a byte count
// near 2^64 does not survive a trip through double).
std::string metric_text(const CompareRow& row, Metric m) {
  switch (m) {
    case Metric::kThroughput:
      return format_thousands(row.throughput, 1) + " samples/s";
    case Metric::kExecutionTime:
      return format_seconds(row.execution_time);
    case Metric::kPeakMemory:
      return format_bytes(row.peak_memory);
    case Metric::kStreamingMemory:
      return format_bytes(row.streaming_memory);
  }
  return "?";
}

// value / base; a zero base gives 1 for a zero value, else infinity.
double ratio(double value, double base) {
  if (base == 0.0) return value == 0.0 ? 1.0 : std::numeric_limits<double>::infinity();
  return value / base;
}

Cell ratio_cell(double value, double base) {
  const double r = ratio(value, base);
  if (std::isinf(r)) return Cell{"n/a", {}};
  return Cell{fmt::format("{:.2f}x", r), r};
}

std::string format_percent_bound(double p) {
  return fmt::format("{}{}%", p > 0 ? "+" : "", p);
}

// Decimals for a column of seconds: three significant digits for its smallest non-zero
// value (plan estimates are microseconds, runs milliseconds), at least 4, at most 9.
int seconds_decimals(const std::vector<CompareRow>& rows) {
  double smallest = 0.0;
  for (const CompareRow& r : rows) {
    if (r.execution_time > 0 && (smallest == 0.0 || r.execution_time < smallest)) {
      smallest = r.execution_time;
    }
  }
  if (smallest == 0.0) return 4;
  const int decimals = 2 - static_cast<int>(std::floor(std::log10(smallest)));
  return std::clamp(decimals, 4, 9);
}

// The default row names: a run folder's run file by its config's name and the folder
// (runs/quick/20261127-181002/run.json: "quick/20261127-181002"), other files by their
// stems; where names still collide, the paths.
std::vector<std::string> default_names(const std::vector<Source>& sources) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const Source& s : sources) {
    // runs/quick/latest/run.json is named by the stamp latest points at.
    std::error_code ec;
    fs::path file = fs::weakly_canonical(fs::absolute(fs::path(s.file)), ec);
    if (ec) file = fs::absolute(fs::path(s.file)).lexically_normal();
    const std::string folder = file.parent_path().filename();
    const bool in_run_folder = s.kind == SourceKind::kRun && file.filename() == "run.json" &&
                               !s.record.name.empty() && !folder.empty();
    names.push_back(in_run_folder ? s.record.name + "/" + folder : s.name);
  }
  std::vector<bool> clash(names.size());
  for (std::size_t i = 0; i < names.size(); ++i)
    clash[i] = std::count(names.begin(), names.end(), names[i]) > 1;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (clash[i]) names[i] = sources[i].file;
  return names;
}

// The keys of two model sections that differ: "layers", "init".
std::vector<std::string> differing_keys(const nlohmann::json& a, const nlohmann::json& b) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : a.items())
    if (!b.contains(key) || b.at(key) != value) keys.push_back(key);
  for (const auto& [key, value] : b.items())
    if (!a.contains(key)) keys.push_back(key);
  return keys;
}

Cell optional_cell(const std::optional<double>& v, const std::string& text) {
  return v ? Cell{text, *v} : Cell{"-", {}};
}

}  // namespace

bool times_comparable(const CompareRow& a, const CompareRow& b) {
  return a.timed_device == b.timed_device;
}

double CompareRow::metric(Metric m) const {
  switch (m) {
    case Metric::kThroughput:
      return throughput;
    case Metric::kExecutionTime:
      return execution_time;
    case Metric::kPeakMemory:
      return static_cast<double>(peak_memory);
    case Metric::kStreamingMemory:
      return static_cast<double>(streaming_memory);
  }
  return 0.0;
}

Comparison compare(const std::vector<Source>& sources, const std::vector<std::string>& names,
                   const std::string& baseline) {
  if (!names.empty() && names.size() != sources.size()) {
    throw InputError("--names: {} names for {} files", names.size(), sources.size());
  }
  Comparison c;
  const std::vector<std::string> row_names = names.empty() ? default_names(sources) : names;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Source& s = sources[i];
    CompareRow row;
    row.name = row_names[i];
    for (const CompareRow& other : c.rows) {
      if (other.name == row.name) {
        throw InputError("two rows are named \"{}\"; name them with --names a,b,...", row.name);
      }
    }
    row.kind = s.kind;
    row.time_basis = time_basis(s);
    row.timed_device = timed_device(s);
    row.sharding_threshold = s.record.plan.sharding_threshold;
    row.throughput = samples_per_second(s);
    row.execution_time = step_seconds(s);
    row.peak_memory = peak_memory(s);
    row.streaming_memory = streaming_memory(s);
    row.profile_round_trip = s.record.plan.device_core_round_trip_seconds;
    row.profile_cache_probe = s.record.plan.device_cache_probe_seconds;
    if (s.kind == SourceKind::kRun) {
      row.round_trip_start = s.record.environment.core_round_trip_start_seconds;
      row.round_trip_end = s.record.environment.core_round_trip_end_seconds;
      row.cache_probes = s.record.environment.cache_probes;
      if (!s.record.loss.empty()) row.final_loss = s.record.loss.back();
      if (s.record.test) {
        row.test_accuracy = s.record.test->accuracy;
        row.test_loss = s.record.test->loss;
      }
    }
    if (s.record.config.is_object() && s.record.config.contains("model"))
      row.model = s.record.config.at("model").dump();
    c.rows.push_back(std::move(row));
  }
  if (!baseline.empty()) {
    const auto it = std::find_if(c.rows.begin(), c.rows.end(),
                                 [&](const CompareRow& r) { return r.name == baseline; });
    if (it == c.rows.end()) {
      std::string known;
      for (const CompareRow& r : c.rows) known += (known.empty() ? "" : ", ") + r.name;
      throw InputError("--baseline: no row is named \"{}\" (rows: {})", baseline, known);
    }
    c.baseline = static_cast<std::size_t>(it - c.rows.begin());
  }
  return c;
}

std::vector<std::string> machine_notes(const Comparison& c) {
  std::vector<std::string> notes;
  if (c.rows.empty()) return notes;
  const CompareRow& base = c.rows[c.baseline];
  const std::string base_profile = fmt::format("the baseline's (\"{}\")", base.name);
  // A figure of the baseline plan's profile, when it has one; else of the run's own.
  struct Then {
    double figure;
    std::string whose;
  };
  const auto then = [&](double base_figure, double own_figure) {
    return base.kind == SourceKind::kPlan && base_figure > 0 ? Then{base_figure, base_profile}
                                                             : Then{own_figure, "its"};
  };
  for (const CompareRow& r : c.rows) {
    const Then trip = then(base.profile_round_trip, r.profile_round_trip);
    if (config::placement_differs(trip.figure, r.round_trip_start) ||
        config::placement_differs(trip.figure, r.round_trip_end))
      notes.push_back(fmt::format(
          "run \"{}\" ran with its CPUs placed otherwise than when {} profile was measured: a "
          "cache line's round trip between two of them took {:.0f} ns as its steps began and "
          "{:.0f} ns as they ended, against {:.0f} ns then (a virtual machine moves its CPUs "
          "between the host's caches); its time is not one the estimate is for: calibrate "
          "again, or run again",
          r.name, trip.whose, r.round_trip_start * 1e9, r.round_trip_end * 1e9, trip.figure * 1e9));
    const Then probe = then(base.profile_cache_probe, r.profile_cache_probe);
    const CacheProbes& probes = r.cache_probes;
    if (probes.n > 0 && (config::caches_differ(probe.figure, probes.min_seconds) ||
                         config::caches_differ(probe.figure, probes.max_seconds)))
      notes.push_back(fmt::format(
          "run \"{}\" ran with another share of the host's last-level cache than when {} "
          "profile was measured: the cache probe took {:.0f} to {:.0f} µs over its steps ({} "
          "probes), against {:.0f} µs then (other work on the host shares the cache); its "
          "time is not one the estimate is for: calibrate again, or run again",
          r.name, probe.whose, probes.min_seconds * 1e6, probes.max_seconds * 1e6, probes.n,
          probe.figure * 1e6));
  }
  return notes;
}

std::vector<std::string> model_notes(const Comparison& c) {
  std::vector<std::string> notes;
  if (c.rows.empty()) return notes;
  const CompareRow& base = c.rows[c.baseline];
  for (const CompareRow& r : c.rows) {
    if (r.model.empty() || base.model.empty() || r.model == base.model) continue;
    std::string keys;
    for (const std::string& k :
         differing_keys(nlohmann::json::parse(base.model), nlohmann::json::parse(r.model)))
      keys += (keys.empty() ? "model." : ", model.") + k;
    notes.push_back(fmt::format(
        "warning: \"{}\" trains another model than the baseline \"{}\" ({} differ): their "
        "losses and accuracies do not compare",
        r.name, base.name, keys));
  }
  return notes;
}

Report compare_report(const Comparison& c) {
  Table t;
  t.key = "compare";
  t.title = "Comparison";
  if (!c.rows.empty()) {
    t.notes.push_back(fmt::format(
        "ratios against baseline \"{}\"; execution time per optimizer step (runs: median); "
        "plan rows are estimates, run rows measurements",
        c.rows[c.baseline].name));
    const CompareRow& base = c.rows[c.baseline];
    if (std::any_of(c.rows.begin(), c.rows.end(),
                    [&](const CompareRow& r) { return !times_comparable(r, base); }))
      t.notes.push_back(fmt::format(
          "throughput and time ratios only between rows timed alike (the baseline's: {}); "
          "n/a for the others, since an estimate for one device against a measurement on "
          "another measures neither; memory compares across all rows (a run allocates what "
          "its plan lists)",
          base.time_basis));
    for (std::string& note : machine_notes(c)) t.notes.push_back(std::move(note));
    for (std::string& note : model_notes(c)) t.notes.push_back(std::move(note));
  }
  t.columns = {{"case", "Case", false},
               {"source", "Source", false},
               {"threshold", "Sharding threshold", true},
               {"throughput", "Throughput (samples/s)", true},
               {"throughput_ratio", "vs base", true},
               {"execution_time", "Execution time (s)", true},
               {"execution_time_ratio", "vs base", true},
               {"peak_memory", "Peak memory per replica", true},
               {"peak_memory_ratio", "vs base", true},
               {"streaming_memory", "Streaming memory", true},
               {"streaming_memory_ratio", "vs base", true},
               {"final_loss", "Final loss", true},
               {"test_accuracy", "Test accuracy", true},
               {"test_loss", "Test loss", true}};
  const int decimals = seconds_decimals(c.rows);
  for (const CompareRow& r : c.rows) {
    const CompareRow& b = c.rows[c.baseline];
    const bool timed_alike = times_comparable(r, b);
    t.rows.push_back({
        Cell{r.name, {}},
        Cell{r.time_basis, {}},
        r.sharding_threshold == 0
            ? Cell{"off", {}}
            : Cell{format_thousands(static_cast<double>(r.sharding_threshold)),
                   static_cast<double>(r.sharding_threshold)},
        Cell{format_thousands(r.throughput, 1), r.throughput},
        timed_alike ? ratio_cell(r.throughput, b.throughput) : Cell{"n/a", {}},
        Cell{fmt::format("{:.{}f}", r.execution_time, decimals), r.execution_time},
        timed_alike ? ratio_cell(r.execution_time, b.execution_time) : Cell{"n/a", {}},
        Cell{format_bytes(r.peak_memory), static_cast<double>(r.peak_memory)},
        ratio_cell(static_cast<double>(r.peak_memory), static_cast<double>(b.peak_memory)),
        Cell{format_bytes(r.streaming_memory), static_cast<double>(r.streaming_memory)},
        ratio_cell(static_cast<double>(r.streaming_memory),
                   static_cast<double>(b.streaming_memory)),
        optional_cell(r.final_loss, fmt::format("{:.4f}", r.final_loss.value_or(0))),
        optional_cell(r.test_accuracy, fmt::format("{:.2f}%", 100 * r.test_accuracy.value_or(0))),
        optional_cell(r.test_loss, fmt::format("{:.4f}", r.test_loss.value_or(0))),
    });
  }
  // Plans alone have no losses: no columns of dashes.
  if (std::none_of(c.rows.begin(), c.rows.end(),
                   [](const CompareRow& r) { return r.final_loss || r.test_accuracy; })) {
    t.columns.resize(t.columns.size() - 3);
    for (auto& row : t.rows) row.resize(row.size() - 3);
  }
  fold_equal_columns(t, {"case"});
  return Report{{t}};
}

// METRIC (<|>) [+-]DIGITS[.DIGITS] %, spaces allowed between the parts. Read by hand:
// std::regex matches recursively and overflows the stack on a long argument.
Gate parse_gate(const std::string& text) {
  const auto malformed = [&] {
    return InputError(
        "--fail-if '{}': want METRIC < PERCENT or METRIC > PERCENT, e.g. 'throughput < -5%'", text);
  };
  std::size_t i = 0;
  const auto skip_spaces = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
  };
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i > start;
  };
  skip_spaces();
  const std::size_t key_start = i;
  while (i < text.size() && ((text[i] >= 'a' && text[i] <= 'z') || text[i] == '_')) ++i;
  const std::string key = text.substr(key_start, i - key_start);
  skip_spaces();
  if (key.empty() || i == text.size() || (text[i] != '<' && text[i] != '>')) throw malformed();
  const bool less = text[i++] == '<';
  skip_spaces();
  const std::size_t number_start = i;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  if (!digits()) throw malformed();
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!digits()) throw malformed();
  }
  const std::size_t number_end = i;
  skip_spaces();
  if (i == text.size() || text[i] != '%') throw malformed();
  ++i;
  skip_spaces();
  if (i != text.size()) throw malformed();

  Gate g;
  g.text = text;
  const auto it = std::find_if(kMetrics.begin(), kMetrics.end(),
                               [&](const MetricInfo& m) { return key == m.key; });
  if (it == kMetrics.end()) {
    throw InputError(
        "--fail-if '{}': unknown metric \"{}\" (throughput, execution_time, peak_memory, "
        "streaming_memory)",
        text, key);
  }
  g.metric = it->metric;
  g.less = less;
  // from_chars takes no '+'.
  const std::size_t from = text[number_start] == '+' ? number_start + 1 : number_start;
  const auto [end, ec] = std::from_chars(text.data() + from, text.data() + number_end, g.percent);
  if (ec != std::errc() || end != text.data() + number_end) {
    throw InputError("--fail-if '{}': {}% is out of range", text,
                     text.substr(number_start, number_end - number_start));
  }
  return g;
}

std::vector<std::string> check_gates(const Comparison& c, const std::vector<Gate>& gates) {
  std::vector<std::string> failures;
  if (c.rows.empty()) return failures;
  const CompareRow& base = c.rows[c.baseline];
  std::vector<std::size_t> checked(gates.size(), 0);
  std::vector<bool> zero_base(gates.size(), false);  // a ratio n/a for the baseline's 0
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    if (i == c.baseline) continue;
    const CompareRow& row = c.rows[i];
    for (std::size_t k = 0; k < gates.size(); ++k) {
      const Gate& g = gates[k];
      const bool timed = g.metric == Metric::kThroughput || g.metric == Metric::kExecutionTime;
      if (timed && !times_comparable(row, base)) continue;
      const double value = row.metric(g.metric);
      const double base_value = base.metric(g.metric);
      // No ratio to a baseline of 0 (the table shows n/a): not checked, as a row timed
      // otherwise is not.
      if (std::isinf(ratio(value, base_value))) {
        zero_base[k] = true;
        continue;
      }
      const double change = (ratio(value, base_value) - 1.0) * 100.0;
      ++checked[k];
      const bool failed = g.less ? change < g.percent : change > g.percent;
      if (!failed) continue;
      failures.push_back(fmt::format(
          "{}: {} {} {} {} ({} vs {} of baseline {})", row.name, metric_key(g.metric),
          format_change(change / 100.0), g.less ? "<" : ">", format_percent_bound(g.percent),
          metric_text(row, g.metric), metric_text(base, g.metric), base.name));
    }
  }
  // A gate that compared nothing has not passed: CI would read its silence as a pass.
  for (std::size_t k = 0; k < gates.size(); ++k) {
    if (checked[k] > 0) continue;
    failures.push_back(fmt::format(
        "'{}' checked no row: {}", gates[k].text,
        c.rows.size() < 2
            ? fmt::format("there is only the baseline \"{}\"; give files to compare with it",
                          base.name)
        : zero_base[k]
            ? fmt::format("every row's ratio is n/a: the baseline \"{}\" has {} 0, or is timed "
                          "otherwise ({})",
                          base.name, metric_key(gates[k].metric), base.time_basis)
            : fmt::format("every row's ratio is n/a, timed otherwise than the baseline \"{}\" "
                          "({}); compare like with like",
                          base.name, base.time_basis)));
  }
  return failures;
}

}  // namespace popkit::reports
