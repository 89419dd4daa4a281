// popreport memory | throughput | compare: parse the arguments, call reports/, map the
// outcome to an exit code (2 for unreadable files and bad options, 1 when the gate fails).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <string_view>

#include "cli/verbs.h"
#include "reports/chart.h"
#include "reports/compare.h"
#include "reports/input_error.h"
#include "reports/memory_report.h"
#include "reports/throughput_report.h"

namespace popkit::cli {

namespace {

struct ReportOptions {
  std::vector<std::string> files;
  std::string format = "text";
  std::string chart;
  std::string output;
};

// The report goes to -o FILE, or to stdout.
void write_to(const std::string& output, const std::function<void(std::ostream&)>& write) {
  if (output.empty()) return write(std::cout);
  std::ofstream file(output, std::ios::binary | std::ios::trunc);
  if (!file) throw Error("{}: cannot open for writing", output);
  write(file);
  file.flush();
  if (!file) throw Error("{}: write failed", output);
}

void add_common(CLI::App* sub, ReportOptions& o) {
  sub->add_option("FILES", o.files,
                  "plan files (popplan plan --format json), run files (poprun) or run folders "
                  "(their run.json)")
      ->required();
  std::vector<std::string> formats;
  for (const std::string_view name : enum_names<reports::Format>()) formats.emplace_back(name);
  sub->add_option("--format", o.format, fmt::format("{}", fmt::join(formats, " | ")))
      ->check(CLI::IsMember(formats));
  add_output_option(sub, o.output, "write the report to FILE instead of stdout");
}

// Runs `body`; input errors (unreadable files, bad options) exit 2. `where`: "popreport
// memory", what the error starts with.
int guarded(const std::string& where, const std::function<int()>& body) {
  try {
    return body();
  } catch (const reports::InputError& e) {
    std::cerr << where << ": error: " << e.what() << '\n';
    return kExitInvalid;
  }
}

// A verb that writes one report of its files, and the chart when asked.
void add_table_verb(Tool& tool, const std::string& verb, const std::string& help,
                    reports::Report (*build)(const std::vector<reports::Source>&),
                    reports::ChartKind chart, const std::string& chart_help) {
  auto o = std::make_shared<ReportOptions>();
  const std::string where = tool.name() + " " + verb;
  CLI::App* sub = tool.add(verb, help, [o, where, build, chart] {
    return guarded(where, [&] {
      const auto sources = reports::load_sources(o->files);
      write_to(o->output, [&](std::ostream& out) {
        reports::write_report(build(sources), reports::parse_format(o->format), out);
      });
      if (!o->chart.empty()) reports::write_chart_file(sources, chart, o->chart);
      return kExitOk;
    });
  });
  add_common(sub, *o);
  add_chart_file(sub, o->chart, chart_help);
}

}  // namespace

void add_report_verbs(Tool& tool) {
  const std::string where = tool.name() + " compare";

  add_table_verb(tool, "memory", "device memory per phase and replica, planned and measured",
                 reports::memory_report, reports::ChartKind::kMemory,
                 "also write an SVG chart: per file, device memory by phase, stacked by "
                 "tensor class, planned beside measured");
  add_table_verb(tool, "throughput", "samples/s, time per step, phase and op kind, bytes moved",
                 reports::throughput_report, reports::ChartKind::kThroughput,
                 "also write an SVG chart: time per step by phase (like with like: estimates "
                 "for a device, or measurements on this CPU), and each run's samples/s and "
                 "loss per step, with its test loss after evaluated epochs");

  auto compare = std::make_shared<ReportOptions>();
  auto names = std::make_shared<std::vector<std::string>>();
  auto baseline = std::make_shared<std::string>();
  auto fail_if = std::make_shared<std::vector<std::string>>();
  CLI::App* sub =
      tool.add("compare", "one row per file, ratios against a baseline, and a CI gate (--fail-if)",
               [compare, names, baseline, fail_if, where] {
                 return guarded(where, [&] {
                   std::vector<reports::Gate> gates;
                   for (const std::string& g : *fail_if) gates.push_back(reports::parse_gate(g));
                   const reports::Format format = reports::parse_format(compare->format);
                   const auto sources = reports::load_sources(compare->files);
                   const reports::Comparison c = reports::compare(sources, *names, *baseline);
                   write_to(compare->output, [&](std::ostream& out) {
                     reports::write_report(reports::compare_report(c), format, out);
                   });
                   std::vector<std::string> row_names;
                   for (const reports::CompareRow& row : c.rows) row_names.push_back(row.name);
                   if (!compare->chart.empty())
                     reports::write_chart_file(sources, reports::ChartKind::kCompare,
                                               compare->chart, row_names);
                   const std::vector<std::string> failures = reports::check_gates(c, gates);
                   for (const std::string& f : failures)
                     std::cerr << where << ": gate failed: " << f << '\n';
                   return failures.empty() ? kExitOk : kExitFailure;
                 });
               });
  add_common(sub, *compare);
  add_chart_file(sub, compare->chart,
                 "also write one SVG chart across the files: peak memory per phase, time per "
                 "phase (like with like) and the loss curves overlaid");
  sub->add_option("--names", *names, "row names, one per file, comma separated")->delimiter(',');
  sub->add_option("--baseline", *baseline, "the row the ratios and the gate compare against");
  sub->add_option("--fail-if", *fail_if,
                  "exit 1 when a row's change against the baseline passes the bound: "
                  "'throughput < -5%', 'peak_memory > +2%' (metrics: throughput, execution_time, "
                  "peak_memory, streaming_memory)");
}

}  // namespace popkit::cli
