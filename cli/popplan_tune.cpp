// popplan tune: plan every combination of execution mode, remote placement, sharding
// threshold and group, io mode and micro-batch × accumulation for a config, and list the
// ones that fit the memory per replica, fastest first, with the Pareto front of memory
// against samples/s. Exit codes: 0 some candidate fits, 1 none does, 2 invalid input.
#include <fmt/ostream.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/units.h"
#include "cli/verbs.h"
#include "config/yaml/load.h"
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
};

int run_tune(const TuneOptions& o) {
  std::string why;
  const auto memory = parse_bytes(o.memory, why);
  if (!memory || *memory == 0) {
    std::cerr << fmt::format("popplan tune: --memory-per-replica '{}': {}\n", o.memory,
                             why.empty() ? "must be > 0" : why);
    return kExitInvalid;
  }
  const auto cfg = config::load_config_reporting(o.config, o.overrides, std::cerr);
  if (!cfg) return kExitInvalid;
  planner::TuneResult r;
  try {
    r = planner::tune(*cfg, {*memory, o.replicas, o.global_batch});
  } catch (const Error& e) {
    std::cerr << "popplan tune: error: " << o.config << ": " << e.what() << '\n';
    return kExitInvalid;
  }
  planner::print_tune(std::cout, r, o.format == "json");
  return r.fits.empty() ? kExitFailure : kExitOk;
}

}  // namespace

void add_tune_verbs(Tool& tool) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* tune =
      tool.add("tune",
               "List the execution modes, remote placements, sharding, io modes and micro-batch x "
               "accumulation splits that fit, fastest first; exit 1 when none fits",
               [o] { return run_tune(*o); });
  tune->add_option("config", o->config, "Config file (YAML)")->required();
  tune->add_option("--memory-per-replica", o->memory, "Device memory per replica, e.g. 900MiB")
      ->required();
  tune->add_option("--replicas", o->replicas, "Replication factor (default: the config's)");
  tune->add_option("--global-batch", o->global_batch,
                   "Samples per optimizer step (default: the config's)");
  tune->add_option("--format", o->format, "Report as text or json")
      ->check(CLI::IsMember({"text", "json"}));
  tune->add_option("--set", o->overrides, "Override a key after loading (repeatable)")
      ->allow_extra_args(false)
      ->take_all();
}

}  // namespace popkit::cli
