// The rules a Config must satisfy (ranges, replica groupings as PopXL defines them,
// cross-field rules), checked in one pass that reports every violation. Works on a
// Config loaded from YAML, whose Locations point errors at file:line:column, and on
// one built in code, whose errors name the key path only.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/diagnostics.h"

namespace popkit::config {

// Where each key path ("replication.groupings.g.stride", "model.layers[1].name") was
// written, and which paths failed to load (rules over those are skipped, so one typo
// gives one error).
class Locations {
 public:
  void set(const std::string& path, const Location& location) { locations_[path] = location; }
  void poison(const std::string& path) { poisoned_.insert(path); }

  // The location of `path`, or of its nearest written ancestor; the file's start
  // (or no position at all for a Config built in code) when none was written.
  [[nodiscard]] Location find(const std::string& path) const;
  // True when `path` was written in the source.
  [[nodiscard]] bool written(const std::string& path) const { return locations_.count(path) != 0; }
  // False when `path`, an ancestor or a descendant of it failed to load.
  [[nodiscard]] bool usable(const std::string& path) const;

  std::string file;  // the config's name, for paths never written

 private:
  std::map<std::string, Location> locations_;
  std::set<std::string> poisoned_;
};

// Upper bound of replication.factor: far beyond any IPU-POD, and small enough that the
// group structure can be checked replica by replica.
inline constexpr std::int64_t kMaxReplicationFactor = 65536;

// Checks every rule and appends diagnostics. May adjust what a warning says it
// adjusts: sharding with replication.factor == 1 is turned off, as PopART does.
void validate_config(Config& config, const Locations& locations,
                     std::vector<Diagnostic>& diagnostics);

// Convenience for a Config built in code.
[[nodiscard]] std::vector<Diagnostic> validate_config(Config& config);

// The rule PopART's pipelining tutorial states: gradient accumulation at least twice the
// number of stages, so the main phase, where every stage works, is at least as long as
// the ramps; and at most kMaxPipelinedAccumulation, as a pipelined step's schedule lists
// each micro-batch of each stage. Empty when it holds, else the message with the numbers.
inline constexpr std::int64_t kMaxPipelinedAccumulation = 65536;
[[nodiscard]] std::string pipeline_accumulation_rule(std::int64_t stages,
                                                     std::int64_t gradient_accumulation);

// The sync pattern a config runs with: execution.sync_pattern when written, else
// replica_and_ladder in phased mode when the devices (replicas x stages) split into two
// equal ladder sets, and full otherwise.
[[nodiscard]] SyncPattern sync_pattern(const Config& config);

}  // namespace popkit::config
