// popplan calibrate: fit a device profile's free parameters to a table of measured
// throughputs (docs/cost-model.md), or with --no-fit price the table's configs with the
// profile as it is. Exit codes: 0 done (and every residual within --tolerance), 1 a
// residual beyond --tolerance or the cases ranked differently from the measurements,
// 2 invalid table, config or profile.
#include <fmt/ostream.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/verbs.h"
#include "config/yaml/calibration_table.h"
#include "config/yaml/profile.h"
#include "planner/build.h"
#include "planner/calibrate.h"
#include "planner/estimate_check.h"

namespace popkit::cli {
namespace {

struct CalibrateOptions {
  std::string table;
  std::vector<std::string> fit;  // empty: the profile's own `fitted` list
  bool no_fit = false;
  double tolerance = 0.0;  // 0: no check
  std::string write;
  std::string format = "text";
};

int run_calibrate(const CalibrateOptions& o) {
  if (!input_readable("popplan calibrate", o.table)) return kExitInvalid;
  const config::CalibrationTable table = config::load_calibration_table(o.table);
  config::print_diagnostics(std::cerr, table.diagnostics, table.sources);
  if (!table.ok() || table.entries.empty()) return kExitInvalid;
  // Every case prices with one profile: the first row's; the others must name the same.
  const config::DeviceProfile& profile = *table.entries.front().config.device.resolved;
  std::vector<planner::CalibrationCase> cases;
  for (const auto& e : table.entries) {
    if (e.config.device.resolved->source != profile.source) {
      std::cerr << fmt::format(
          "popplan calibrate: error: {}: case '{}' uses device profile {}, the first case {}: a "
          "table calibrates one profile\n",
          o.table, e.name, e.config.device.resolved->source, profile.source);
      return kExitInvalid;
    }
    planner::Plan plan =
        planner::build_plan(e.config, e.eval ? planner::Program::kEval : planner::Program::kTrain);
    if (const std::string why = planner::estimate_problem(plan); !why.empty()) {
      std::cerr << fmt::format("popplan calibrate: error: {}: case '{}': {}\n", o.table, e.name,
                               why);
      return kExitInvalid;
    }
    cases.push_back({e.name, std::move(plan), e.samples_per_second});
  }
  // --fit KEY: its prior is the profile's value.
  std::vector<config::DeviceProfile::Fitted> priors = profile.fitted;
  if (!o.fit.empty()) {
    priors.clear();
    for (const auto& key : o.fit) {
      const config::ProfileParameter* p = config::find_profile_parameter(key);
      if (p == nullptr) {
        std::cerr << fmt::format(
            "popplan calibrate: error: --fit {}: not a parameter of a profile\n", key);
        return kExitInvalid;
      }
      priors.push_back({key, p->of(profile)});
    }
  }
  const planner::CalibrationResult r =
      o.no_fit ? planner::price_cases(cases, profile) : planner::calibrate(cases, profile, priors);
  planner::print_calibration(std::cout, r, o.format == "json");
  if (!o.write.empty()) {
    config::DeviceProfile written = r.profile;
    written.fitted = priors;
    std::vector<std::string> header{
        written.description,
        fmt::format("Written by `popplan calibrate --table {}{} --write FILE`:", o.table,
                    o.fit.empty() ? "" : " --fit ..."),
        "the parameters marked (fitted) were fitted to that table's measured throughputs,",
        "the others are published figures or stated assumptions; docs/cost-model.md has",
        "the model, the figures' sources, the fit and its residuals."};
    std::ofstream file(o.write);
    file << config::profile_to_yaml(written, header);
    if (!file) throw Error("cannot write {}", o.write);
  }
  if (o.tolerance > 0 && (r.worst_residual() > o.tolerance || !r.same_order())) {
    std::cerr << fmt::format(
        "popplan calibrate: worst residual {:.1f}% (tolerance {:.1f}%){}\n",
        100 * r.worst_residual(), 100 * o.tolerance,
        r.same_order() ? "" : "; the estimates rank the cases differently from the measurements");
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void add_calibrate_verbs(Tool& tool) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* calibrate = tool.add(
      "calibrate",
      "Fit a device profile's free parameters to measured throughputs (a table of configs and "
      "samples/s); exit 1 when --tolerance is given and a residual exceeds it",
      [o] { return run_calibrate(*o); });
  calibrate
      ->add_option("--table", o->table,
                   "The measurements: CSV with the header case,config,set,samples_per_second "
                   "(--eval in set: a run of the evaluation program)")
      ->required();
  calibrate->add_option("--fit", o->fit,
                        "Parameters to fit, e.g. overheads.op_seconds (repeatable; default: the "
                        "profile's `fitted` list)");
  calibrate->add_flag("--no-fit", o->no_fit, "Price the cases with the profile as it is");
  calibrate
      ->add_option("--tolerance", o->tolerance,
                   "Fail (exit 1) when a residual exceeds this fraction, e.g. 0.15, or the "
                   "estimates rank the cases differently")
      ->check(non_negative(Number::kReal));
  add_output_option(calibrate, o->write, "Write the fitted profile (YAML) to this file", "--write");
  calibrate->add_option("--format", o->format, "Report as text or json")
      ->check(CLI::IsMember({"text", "json"}));
}

}  // namespace popkit::cli
