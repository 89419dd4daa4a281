// `popreport compare`: one row per plan or run file, in the shape of the PopXL
// remote-variables tutorial's table (Case | Threshold | Throughput | Execution time |
// Peak memory per replica | Streaming memory), ratios against a baseline, and the CI
// gate (--fail-if 'throughput < -5%') that says which row falls short and by how much.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/source.h"
#include "reports/table.h"

namespace popkit::reports {

enum class Metric { kThroughput, kExecutionTime, kPeakMemory, kStreamingMemory };

struct CompareRow {
  std::string name;
  SourceKind kind = SourceKind::kRun;
  std::int64_t sharding_threshold = 0;  // 0 = off
  double throughput = 0.0;              // samples/s
  double execution_time = 0.0;          // seconds per optimizer step
  std::uint64_t peak_memory = 0;        // per replica
  std::uint64_t streaming_memory = 0;   // per replica
  // What the time figures are: "estimate for ipu-mk2" (a plan, for its device profile) or
  // "measured on CPU" (a run). Throughput and time are compared only between rows timed
  // on the same device: an IPU estimate against a CPU measurement says nothing about
  // either, while an estimate with a CPU profile is one of what poprun measures.
  std::string time_basis;
  std::string timed_device;  // reports/source.h: rows compare times when it is equal
  // Where the CPUs were (runner/placement.h): the profile's when it was measured (a plan's,
  // or the one a run ran with), and a run's as its steps began and ended. 0: not known.
  double profile_round_trip = 0.0;
  double round_trip_start = 0.0, round_trip_end = 0.0;
  // How much of the last-level cache the host left the threads (runner/calibrate.h
  // cache_probe_seconds), likewise. 0: not known.
  double profile_cache_probe = 0.0;
  CacheProbes cache_probes{};
  // A run's last training loss and final test figures; nullopt for a plan, and for a run
  // stopped before its final evaluation.
  std::optional<double> final_loss{};
  std::optional<double> test_accuracy{};
  std::optional<double> test_loss{};
  // The config's model section, compact JSON; "" when the file has no config (a plan, a
  // run file from before configs were recorded).
  std::string model{};
  [[nodiscard]] double metric(Metric m) const;
};

struct Comparison {
  std::vector<CompareRow> rows;
  std::size_t baseline = 0;
};

// Whether the throughput and time of two rows can be set against each other.
[[nodiscard]] bool times_comparable(const CompareRow& a, const CompareRow& b);

// `names` (one per source, or empty: a run folder's run.json by its config's name and
// the folder's stamp, "quick/20261127-181002"; other files by their stems, or where
// those collide, their paths) name the rows; `baseline` is a
// row name (empty: the first row). Throws InputError for a wrong count of names, a
// repeated name or an unknown baseline.
Comparison compare(const std::vector<Source>& sources, const std::vector<std::string>& names,
                   const std::string& baseline);

// A run set beside an estimate made for CPUs placed otherwise (config::placement_differs),
// or for another share of the host's last-level cache (config::caches_differ), ran on
// another machine than the one measured: a line for each, saying so; empty when none
// did. The estimate: the baseline plan's profile where it measured the figure, else the
// run's own.
std::vector<std::string> machine_notes(const Comparison& comparison);

// A warning for each row whose model differs from the baseline's (both known), naming
// the model's keys that differ: its loss and accuracy do not compare.
std::vector<std::string> model_notes(const Comparison& comparison);

// The table: columns equal in every row are folded into header lines; "case" stays; the
// machine and model notes are among its notes.
Report compare_report(const Comparison& comparison);

// `METRIC < PERCENT` or `METRIC > PERCENT`: the row fails when its change against the
// baseline, in percent, is below (<) or above (>) the bound.
struct Gate {
  std::string text;  // as the user wrote it
  Metric metric = Metric::kThroughput;
  bool less = true;
  double percent = 0.0;
};

// Throws InputError for anything but `throughput|execution_time|peak_memory|
// streaming_memory  <|>  [+-]N%`.
Gate parse_gate(const std::string& text);

// A gate on throughput or execution time skips rows whose time basis is not the
// baseline's (times_comparable).
// One line per failing (row, gate), e.g. "b: throughput -7.3% < -5% (925.9 vs 1,000.0
// samples/s of baseline a)", and one per gate that checked no row (every ratio n/a, or
// no row beside the baseline): such a gate fails, it does not pass. Empty when every
// gate checked a row and every row passed. The baseline row is not checked.
std::vector<std::string> check_gates(const Comparison& comparison, const std::vector<Gate>& gates);

}  // namespace popkit::reports
