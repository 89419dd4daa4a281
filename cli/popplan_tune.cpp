// popplan tune: plan every combination of pipeline stages on the same devices, execution
// mode, remote placement, sharding threshold and group, io mode and micro-batch ×
// accumulation for a config (planner/tune.h), and list the ones that fit the memory per
// replica, fastest first, with the Pareto front of memory against samples/s; -o FILE
// writes the winner as a config, the user's file with the winner's changes. Exit codes: 0 some
// candidate fits, 1 none does (or the winner could not be written), 2 invalid input (or FILE exists
// without --force).
#include <fmt/ostream.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/units.h"
#include "cli/verbs.h"
#include "config/yaml/edit.h"
#include "config/yaml/load.h"
#include "planner/fit_advice.h"
#include "planner/plan_text.h"
#include "planner/text_table.h"
#include "planner/tune.h"

namespace popkit::cli {
namespace {

struct TuneOptions {
  std::string config;
  std::string memory;
  std::int64_t replicas = 0;
  std::int64_t global_batch = 0;
  std::string format = "text";
  std::vector<std::string> overrides;
  std::string write;  // the winner's config file
  bool force = false;
  std::size_t max_combinations = planner::kMaxTuneCombinations;
  std::int64_t top = 20;  // rows listed; 0: all
};

// The user's file with their --set overrides and then the winner's changes: the config
// the tuner started from, turned into the winner.
int write_winner(const TuneOptions& o, const planner::TuneCandidate& winner) {
  std::vector<std::string> settings = o.overrides;
  settings.insert(settings.end(), winner.changes.begin(), winner.changes.end());
  std::vector<std::string> changed;
  try {
    changed = config::write_config_with(config::config_file_of(o.config), settings, winner.config,
                                        o.write);
  } catch (const Error& e) {
    std::cerr << "popplan tune: error: -o: " << e.what() << '\n';
    return kExitFailure;
  }
  // Beside a JSON report, on stderr, so stdout stays one JSON document.
  std::ostream& out = o.format == "json" ? std::cerr : std::cout;
  fmt::print(out, "\nwrote {}: {} with the winner's {} change{} (peak {}, est. {} samples/s)\n",
             o.write, o.config, changed.size(), changed.size() == 1 ? "" : "s",
             planner::format_bytes(winner.peak_bytes), format_thousands(winner.samples_per_second));
  for (const auto& c : changed) fmt::print(out, "  {}\n", c);
  return kExitOk;
}

int run_tune(const TuneOptions& o) {
  std::string why;
  std::optional<std::uint64_t> memory;
  if (!o.memory.empty()) memory = parse_bytes(o.memory, why);
  if (!o.memory.empty() && (!memory || *memory == 0)) {
    std::cerr << fmt::format("popplan tune: error: --memory-per-replica '{}': {}\n", o.memory,
                             why.empty() ? "must be > 0" : why);
    return kExitInvalid;
  }
  std::error_code ec;
  if (!o.write.empty() && !o.force &&
      std::filesystem::exists(std::filesystem::symlink_status(o.write, ec))) {
    std::cerr << fmt::format(
        "popplan tune: error: -o {}: the file exists; popplan tune does not overwrite a file: "
        "give another path, or --force to write over it\n",
        o.write);
    return kExitInvalid;
  }
  if (!config_readable("popplan tune", o.config)) return kExitInvalid;
  const auto cfg = config::load_config_reporting(o.config, o.overrides, std::cerr);
  if (!cfg) return kExitInvalid;
  if (!memory) memory = planner::memory_per_replica(*cfg);  // the config's, or its profile's
  planner::TuneResult r;
  const planner::TuneRequest request{*memory, o.replicas, o.global_batch, o.max_combinations};
  try {
    r = planner::tune(*cfg, request);
  } catch (const Error& e) {
    std::cerr << "popplan tune: error: " << o.config << ": " << e.what() << '\n';
    return kExitInvalid;
  }
  // When nothing fits, advice only where planning shows a fit: with more replicas, if any.
  if (r.fits.empty()) r.advice = planner::advise_beyond_tune(*cfg, request, r);
  planner::print_tune(std::cout, r, o.format == "json", static_cast<std::size_t>(o.top));
  if (r.fits.empty()) {
    planner::Printer err(std::cerr);
    planner::print_wrapped(
        err, "popplan tune: nothing fits; ", "  ",
        r.advice->fits ? planner::describe_advice(*r.advice, *memory)
                       : fmt::format("nor with up to {} times the replicas ({} candidates planned "
                                     "in all; the least peak {})",
                                     planner::kMoreReplicas, r.advice->n_planned,
                                     planner::format_bytes(r.advice->peak_bytes)));
    err.flush();
    if (!o.write.empty()) std::cerr << "popplan tune: " << o.write << " not written\n";
    return kExitFailure;
  }
  if (!o.write.empty()) return write_winner(o, r.fits.front());
  return kExitOk;
}

}  // namespace

void add_tune_verbs(Tool& tool) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* tune =
      tool.add("tune",
               "List the execution modes, remote placements, sharding, io modes and micro-batch x "
               "accumulation splits that fit, fastest first; exit 1 when none fits",
               [o] { return run_tune(*o); });
  tune->add_option("CONFIG", o->config, "Config file (YAML), or a run folder")->required();
  tune->add_option("--memory-per-replica", o->memory,
                   "Device memory per replica, e.g. 900MiB (default: the config's "
                   "device.memory_per_replica, else its profile's)");
  tune->add_option("--top", o->top, "Rows to list, fastest first; 0 lists them all (default 20)")
      ->check(non_negative());
  tune->add_option("--replicas", o->replicas, "Replication factor (default: the config's)")
      ->check(positive());
  tune->add_option("--global-batch", o->global_batch,
                   "Samples per optimizer step (default: the config's)")
      ->check(positive());
  tune->add_option("--format", o->format, "Report as text or json")
      ->check(CLI::IsMember({"text", "json"}));
  add_output_option(tune, o->write,
                    "Write the winner to FILE as a config: CONFIG's text with the winner's "
                    "changes, its comments and layout kept",
                    "--write");
  tune->add_flag("--force", o->force, "With -o: write over an existing FILE");
  tune->add_option("--max-combinations", o->max_combinations,
                   fmt::format("Search at most N combinations (for a model of more than {0} "
                               "layers, N times {0} over its layers); past it, fewer sharding "
                               "groups and micro-batches are tried, spread evenly (the config's "
                               "own kept)",
                               planner::kTuneFullSearchLayers))
      ->capture_default_str()
      ->check(positive());
  tune->add_option("--set", o->overrides, "Override a key after loading (repeatable)")
      ->allow_extra_args(false)
      ->take_all();
}

}  // namespace popkit::cli
