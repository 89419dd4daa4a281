// popplan plan and popplan groups: build a config's plan (text or JSON, to stdout or a
// file), optionally priced over a network of hosts, and print replica groupings as
// "Group | Replicas" tables.
// Exit codes: plan 0 fits / 1 does not fit / 2 invalid config; groups 0 / 2.
#include <fmt/ranges.h>

#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/output_file.h"
#include "cli/verbs.h"
#include "config/validate.h"
#include "config/yaml/load.h"
#include "planner/build.h"
#include "planner/estimate_check.h"
#include "planner/fit_advice.h"
#include "planner/host_memory.h"
#include "planner/plan_json.h"
#include "planner/plan_text.h"
#include "planner/text_table.h"
#include "planner/tune.h"
#include "reports/diagrams.h"

namespace popkit::cli {
namespace {

struct PlanOptions {
  std::string config;
  std::string format = "text";
  std::string output;
  std::string chart;  // --chart FILE.svg
  bool eval = false;
  bool ops = false;
  std::vector<std::string> overrides;
  // The network, when the replicas span hosts (0: all on one host). Where a run is
  // deployed is not part of what it computes, so it is an option, not a config key.
  std::int64_t replicas_per_host = 0;
  double network_gbps = 10.0;
  double network_latency_us = 5.0;
};

int run_plan(const PlanOptions& o) {
  if (!config_readable("popplan plan", o.config)) return kExitInvalid;
  const auto cfg = config::load_config_reporting(o.config, o.overrides, std::cerr);
  if (!cfg) return kExitInvalid;
  planner::Plan plan;
  std::optional<planner::NetworkProfile> network;
  if (o.replicas_per_host > 0)
    network = planner::NetworkProfile{o.replicas_per_host, o.network_gbps * 1e9 / 8,
                                      o.network_latency_us / 1e6};
  const planner::Program program = o.eval ? planner::Program::kEval : planner::Program::kTrain;
  try {
    plan = planner::build_plan(*cfg, program, nullptr, network ? &*network : nullptr);
    if (const std::string why = planner::estimate_problem(plan); !why.empty())
      throw Error("{}", why);
    // Advice is only what planning showed to fit: the builder's hints are not checked.
    if (!plan.fits) {
      const std::vector<planner::FitAdvice> advice = planner::advise_fit(*cfg, program);
      plan.not_fitting.advice = advice.front();
      plan.not_fitting.suggestions.clear();
      for (const auto& a : advice)
        plan.not_fitting.suggestions.push_back(
            planner::describe_advice(a, plan.memory_per_replica));
    }
  } catch (const Error& e) {
    std::cerr << "popplan plan: error: " << o.config << ": " << e.what() << '\n';
    return kExitInvalid;
  }
  std::ofstream file;
  if (!o.output.empty()) {
    file.open(o.output);
    if (!file) throw Error("cannot write {}", o.output);
  }
  std::ostream& out = o.output.empty() ? std::cout : file;
  if (o.format == "json") {
    planner::write_plan_json(out, plan);
    out << '\n';
  } else {
    planner::print_plan(out, plan, {o.ops, o.format == "wide"});
  }
  if (!out) throw Error("cannot write {}", o.output.empty() ? "the plan" : o.output);
  if (!o.chart.empty())
    reports::write_svg_file(o.chart,
                            [&](std::ostream& svg) { reports::write_plan_svg(svg, plan); });
  if (o.format == "json" || !o.output.empty()) {
    for (const auto& w : plan.warnings) std::cerr << "popplan: warning: " << w << '\n';
    if (!plan.fits) {
      std::cerr << fmt::format("popplan: {} does not fit: phase '{}' needs {} more than {}\n",
                               o.config, plan.not_fitting.phase,
                               planner::format_bytes(plan.not_fitting.bytes_over),
                               planner::format_bytes(plan.memory_per_replica));
      for (const auto& advice : plan.not_fitting.suggestions)
        std::cerr << "popplan: " << advice << '\n';
    }
  }
  // This machine's memory is not the plan's business (the plan is for the device and
  // may run elsewhere), so a run too big for it is a warning, not a failure.
  if (const std::string why =
          planner::host_memory_problem(plan.host_memory, planner::available_host_memory());
      !why.empty()) {
    planner::Printer err(std::cerr);
    planner::print_wrapped(err, "popplan: warning: ", "  ",
                           "poprun would refuse this run here: " + why);
  }
  return plan.fits ? kExitOk : kExitFailure;
}

struct GroupsOptions {
  std::string config;
  std::int64_t factor = 0;
  std::int64_t group_size = 0;
  std::int64_t stride = 1;
  std::string format = "text";
  std::string chart;   // --chart FILE.svg
  std::string output;  // -o FILE: the tables (or JSON) there instead of stdout
  std::vector<std::string> overrides;
};

// The groupings' text to -o FILE (whole or not at all), or to stdout.
void put_groups(const GroupsOptions& o, const std::string& text) {
  if (o.output.empty()) {
    std::cout << text;
    return;
  }
  AtomicFile file(o.output, TemporaryName::kSuffix);
  file.write(text.data(), text.size());
  file.commit();
}

// False, said, when there are too many replicas to draw: refused input, nothing written.
bool draw_groups(const std::string& chart, const std::vector<reports::NamedGrouping>& groupings,
                 const std::vector<std::string>& notes = {}) {
  if (chart.empty()) return true;
  if (const std::int64_t r = groupings.empty() ? 0 : groupings.front().grouping.factor;
      r > reports::kMostDrawnReplicas) {
    std::cerr << fmt::format(
        "popplan groups: error: a picture of {} replicas would be unreadable: --chart draws at "
        "most {}\n",
        r, reports::kMostDrawnReplicas);
    return false;
  }
  reports::write_svg_file(
      chart, [&](std::ostream& svg) { reports::write_groups_svg(svg, groupings, notes); });
  return true;
}

int run_groups(const GroupsOptions& o) {
  const bool json = o.format == "json";
  std::ostringstream out;
  if (o.config.empty()) {
    if (o.factor < 1 || o.group_size < 1 || o.stride < 1) {
      std::vector<std::string> wrong;
      if (o.factor < 1) wrong.push_back(o.factor == 0 ? "--factor is missing" : "--factor < 1");
      if (o.group_size < 1)
        wrong.push_back(o.group_size == 0 ? "--group-size is missing" : "--group-size < 1");
      if (o.stride < 1) wrong.push_back(fmt::format("--stride is {}", o.stride));
      std::cerr << fmt::format(
          "popplan groups: error: give CONFIG, or --factor, --group-size (and --stride), all >= "
          "1{}\n",
          wrong.size() == 2 && o.factor == 0 && o.group_size == 0
              ? std::string()
              : fmt::format(": {}", fmt::join(wrong, ", ")));
      return kExitInvalid;
    }
    // A table a row per group: as many replicas as a config may have, no more.
    if (o.factor > config::kMaxReplicationFactor) {
      std::cerr << fmt::format(
          "popplan groups: error: --factor {} is more than {}, the most replicas a config may "
          "have\n",
          o.factor, config::kMaxReplicationFactor);
      return kExitInvalid;
    }
    // PopXL ReplicaGrouping rules.
    if (o.stride == 1 && o.factor % o.group_size != 0) {
      std::cerr << fmt::format(
          "popplan groups: error: --group-size {} does not divide --factor {}, but stride 1 needs "
          "factor % group_size == 0\n",
          o.group_size, o.factor);
      return kExitInvalid;
    }
    // A product past the factor (one that overflows among them) is said without computing
    // it.
    if (o.stride != 1 && o.stride > o.factor / o.group_size) {
      std::cerr << fmt::format(
          "popplan groups: error: --stride {} x --group-size {} is more than --factor {}, but "
          "stride != 1 needs stride x group_size == factor\n",
          o.stride, o.group_size, o.factor);
      return kExitInvalid;
    }
    if (o.stride != 1 && o.stride * o.group_size != o.factor) {
      std::cerr << fmt::format(
          "popplan groups: error: --stride {} x --group-size {} = {}, but stride != 1 needs "
          "stride x group_size == factor ({})\n",
          o.stride, o.group_size, o.stride * o.group_size, o.factor);
      return kExitInvalid;
    }
    const planner::ReplicaGrouping g{o.factor, o.group_size, o.stride};
    if (!draw_groups(o.chart,
                     {{fmt::format("group_size {}, stride {}", g.group_size, g.stride), g}}))
      return kExitInvalid;
    if (json)
      out << planner::grouping_to_json(g).dump(1) << '\n';
    else
      planner::print_grouping(out, g);
    put_groups(o, out.str());
    return kExitOk;
  }
  if (!config_readable("popplan groups", o.config)) return kExitInvalid;
  const auto cfg = config::load_config_reporting(o.config, o.overrides, std::cerr);
  if (!cfg) return kExitInvalid;
  const std::int64_t r = cfg->replication.factor;
  std::vector<config::Grouping> all = cfg->replication.groupings;
  all.insert(all.begin(), config::Grouping{"(all)", r, 1});
  nlohmann::json groupings = nlohmann::json::array();
  std::vector<reports::NamedGrouping> drawn;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const planner::ReplicaGrouping g{r, all[i].group_size, all[i].stride};
    drawn.push_back({all[i].name, g});
    if (json) {
      auto j = planner::grouping_to_json(g);
      j["name"] = all[i].name;
      groupings.push_back(j);
      continue;
    }
    out << fmt::format("{}Grouping {}: group_size {}, stride {} over {} replicas\n", i ? "\n" : "",
                       all[i].name, g.group_size, g.stride, r);
    planner::print_grouping(out, g);
  }
  const auto name = [](const std::string& n) { return n.empty() ? std::string("(all)") : n; };
  const std::string vars = name(cfg->variables.grouping);
  const std::string shard =
      name(cfg->sharding.grouping.empty() ? cfg->variables.grouping : cfg->sharding.grouping);
  if (!draw_groups(o.chart, drawn,
                   {fmt::format("variables: one value per group of {}; sharding: {}", vars,
                                cfg->sharding.enabled ? "over each group of " + shard : "off")}))
    return kExitInvalid;
  if (json) {
    const nlohmann::json j = {
        {"replication_factor", r},
        {"groupings", groupings},
        {"variables", vars},
        {"sharding", cfg->sharding.enabled ? nlohmann::json(shard) : nlohmann::json()}};
    out << j.dump(1) << '\n';
  } else {
    out << fmt::format("\nvariables: {}\nsharding: {}\n", vars,
                       cfg->sharding.enabled ? shard : std::string("off"));
  }
  put_groups(o, out.str());
  return kExitOk;
}

}  // namespace

void add_plan_verbs(Tool& tool) {
  auto plan = std::make_shared<PlanOptions>();
  CLI::App* p = tool.add(
      "plan",
      "Build the phased execution plan of CONFIG: phases, ops, buffers, tensors, memory per "
      "replica. Exit 0 when it fits the device, 1 when it does not, 2 for an invalid config.",
      [plan] { return run_plan(*plan); });
  p->add_option("CONFIG", plan->config, "the config file (YAML), or a run folder")->required();
  p->add_option("--format", plan->format,
                "text (tables within 100 columns, the rows of repeated blocks folded), wide "
                "(each table in one piece, every row) or json")
      ->check(CLI::IsMember({"text", "wide", "json"}));
  p->add_flag("--ops", plan->ops,
              "text: also the device tensors and every phase's ops (the schedule), after the "
              "verdict, the memory and the variables");
  add_output_option(p, plan->output, "write the plan to FILE instead of stdout");
  add_chart_file(p, plan->chart,
                 "also draw the plan as SVG into FILE.svg: each phase's loads, collectives, "
                 "compute and stores with its device memory, or a pipeline's schedule");
  p->add_flag("--eval", plan->eval,
              "the evaluation plan instead: forward only, eval.micro_batch_size, the weights "
              "where training keeps them, no optimizer state or gradients");
  p->add_option("--set", plan->overrides, "override a config key: --set key.path=value")
      ->allow_extra_args(false);
  CLI::Option* per_host =
      p->add_option("--replicas-per-host", plan->replicas_per_host,
                    "spread the replicas over hosts, N per host (host h holds replicas [h N, "
                    "(h+1) N), as mpirun fills hosts with consecutive ranks) and price the "
                    "collectives' cross-host bytes over the network")
          ->check(positive());
  p->add_option("--network-gbps", plan->network_gbps,
                "each host's network link in Gb/s, each way (with --replicas-per-host)")
      ->capture_default_str()
      ->check(positive(Number::kReal))
      ->needs(per_host);
  p->add_option("--network-latency-us", plan->network_latency_us,
                "microseconds per message across hosts (with --replicas-per-host)")
      ->capture_default_str()
      ->check(non_negative(Number::kReal))
      ->needs(per_host);

  auto groups = std::make_shared<GroupsOptions>();
  CLI::App* g = tool.add(
      "groups",
      "Print replica groupings as Group | Replicas tables: those of CONFIG, or the one given "
      "by --factor, --group-size and --stride.",
      [groups] { return run_groups(*groups); });
  g->add_option("CONFIG", groups->config, "the config file (YAML), or a run folder");
  g->add_option("--factor", groups->factor, "replication factor R")->check(whole_number());
  g->add_option("--group-size", groups->group_size, "replicas per group")->check(whole_number());
  g->add_option("--stride", groups->stride, "distance between members (default 1)")
      ->check(whole_number());
  g->add_option("--format", groups->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  add_chart_file(g, groups->chart,
                 "also draw the groupings as SVG into FILE.svg: a box per replica, coloured by "
                 "its group");
  add_output_option(g, groups->output, "write the groupings to FILE instead of stdout");
  g->add_option("--set", groups->overrides, "override a config key: --set key.path=value")
      ->allow_extra_args(false);
}

}  // namespace popkit::cli
