// popreport memory | throughput | compare: parse the arguments, call reports/, map the
// outcome to an exit code (2 for unreadable files and bad options, 1 when the gate fails).
#include <iostream>

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
};

void add_common(CLI::App* sub, ReportOptions& o) {
  sub->add_option("files", o.files, "plan files (popplan plan --format json) or run files (poprun)")
      ->required();
  sub->add_option("--format", o.format, "text | markdown | csv | json")
      ->check(CLI::IsMember({"text", "markdown", "csv", "json"}));
  sub->add_option("--chart", o.chart,
                  "also write an SVG chart: memory per phase; for runs the loss and phase times");
}

// Runs `body`; input errors (unreadable files, bad options) exit 2.
int guarded(const std::string& tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const reports::InputError& e) {
    std::cerr << tool << ": error: " << e.what() << '\n';
    return kExitInvalid;
  }
}

}  // namespace

void add_report_verbs(Tool& tool) {
  const std::string name = tool.name();

  auto memory = std::make_shared<ReportOptions>();
  add_common(tool.add("memory", "device memory per phase and replica, planned and measured",
                      [memory, name] {
                        return guarded(name, [&] {
                          const auto sources = reports::load_sources(memory->files);
                          reports::write_report(reports::memory_report(sources),
                                                reports::parse_format(memory->format), std::cout);
                          if (!memory->chart.empty())
                            reports::write_chart_file(sources, memory->chart);
                          return kExitOk;
                        });
                      }),
             *memory);

  auto throughput = std::make_shared<ReportOptions>();
  add_common(tool.add("throughput", "samples/s, time per step, phase and op kind, bytes moved",
                      [throughput, name] {
                        return guarded(name, [&] {
                          const auto sources = reports::load_sources(throughput->files);
                          reports::write_report(reports::throughput_report(sources),
                                                reports::parse_format(throughput->format),
                                                std::cout);
                          if (!throughput->chart.empty()) {
                            reports::write_chart_file(sources, throughput->chart);
                          }
                          return kExitOk;
                        });
                      }),
             *throughput);

  auto compare = std::make_shared<ReportOptions>();
  auto names = std::make_shared<std::vector<std::string>>();
  auto baseline = std::make_shared<std::string>();
  auto fail_if = std::make_shared<std::vector<std::string>>();
  CLI::App* sub =
      tool.add("compare", "one row per file, ratios against a baseline, and a CI gate (--fail-if)",
               [compare, names, baseline, fail_if, name] {
                 return guarded(name, [&] {
                   std::vector<reports::Gate> gates;
                   for (const std::string& g : *fail_if) gates.push_back(reports::parse_gate(g));
                   const reports::Format format = reports::parse_format(compare->format);
                   const auto sources = reports::load_sources(compare->files);
                   const reports::Comparison c = reports::compare(sources, *names, *baseline);
                   reports::write_report(reports::compare_report(c), format, std::cout);
                   if (!compare->chart.empty()) reports::write_chart_file(sources, compare->chart);
                   const std::vector<std::string> failures = reports::check_gates(c, gates);
                   for (const std::string& f : failures)
                     std::cerr << name << ": gate failed: " << f << '\n';
                   return failures.empty() ? kExitOk : kExitFailure;
                 });
               });
  add_common(sub, *compare);
  sub->add_option("--names", *names, "row names, one per file, comma separated")->delimiter(',');
  sub->add_option("--baseline", *baseline, "the row the ratios and the gate compare against");
  sub->add_option("--fail-if", *fail_if,
                  "exit 1 when a row's change against the baseline passes the bound: "
                  "'throughput < -5%', 'peak_memory > +2%' (metrics: throughput, execution_time, "
                  "peak_memory, streaming_memory)");
}

}  // namespace popkit::cli
