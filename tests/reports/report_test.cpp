// Golden outputs of every verb in every format, from the fixtures in tests/data/reports
// (fixed timings, so the outputs are stable).
#include <boost/test/unit_test.hpp>
#include <sstream>

#include "reports/compare.h"
#include "reports/input_error.h"
#include "reports/memory_report.h"
#include "reports/throughput_report.h"
#include "tests/reports/golden.h"

namespace r = popkit::reports;
using r::testing::fixtures;
using r::testing::golden;

namespace {

struct NamedFormat {
  r::Format format;
  const char* extension;
};
const NamedFormat kFormats[] = {{r::Format::kText, "txt"},
                                {r::Format::kWide, "wide.txt"},
                                {r::Format::kMarkdown, "md"},
                                {r::Format::kCsv, "csv"},
                                {r::Format::kJson, "json"}};

std::string render(const r::Report& report, r::Format format) {
  std::ostringstream out;
  r::write_report(report, format, out);
  return out.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(report_golden)

BOOST_AUTO_TEST_CASE(memory_in_every_format) {
  const auto report = r::memory_report(fixtures({"base.json", "nosharding.json"}));
  for (const NamedFormat& f : kFormats) {
    const std::string actual = render(report, f.format);
    BOOST_TEST(actual == golden(std::string("memory.") + f.extension, actual));
  }
}

BOOST_AUTO_TEST_CASE(throughput_in_every_format) {
  const auto report = r::throughput_report(fixtures({"base.json", "nosharding.json"}));
  for (const NamedFormat& f : kFormats) {
    const std::string actual = render(report, f.format);
    BOOST_TEST(actual == golden(std::string("throughput.") + f.extension, actual));
  }
}

BOOST_AUTO_TEST_CASE(compare_in_every_format) {
  const auto c = r::compare(fixtures({"base.json", "nosharding.json", "fast.json"}),
                            {"on-chip", "no sharding", "fast"}, "");
  const auto report = r::compare_report(c);
  for (const NamedFormat& f : kFormats) {
    const std::string actual = render(report, f.format);
    BOOST_TEST(actual == golden(std::string("compare.") + f.extension, actual));
  }
}

BOOST_AUTO_TEST_CASE(compare_against_a_named_baseline) {
  const auto c = r::compare(fixtures({"base.json", "fast.json"}), {}, "fast");
  BOOST_TEST(c.baseline == 1u);
  const std::string actual = render(r::compare_report(c), r::Format::kText);
  BOOST_TEST(actual == golden("compare_baseline.txt", actual));
}

BOOST_AUTO_TEST_CASE(memory_differences_hold_any_byte_counts) {
  // Differences were taken in int64_t: signed overflow past 2^63.
  r::Source s;
  s.file = "big.json";
  s.kind = r::SourceKind::kRun;
  r::PhaseRecord phase;
  phase.name = "p";
  phase.planned.peak = 9223372036854775808u;
  phase.measured = {r::Memory{}};
  s.record.phases = {phase};
  s.record.streaming_measured = {18446744073709551615u};
  const r::Report report = r::memory_report({s});
  BOOST_TEST(report.tables.at(0).rows.at(1).at(5).text == "-8589934592.00 GiB");
  BOOST_TEST(*report.tables.at(0).rows.at(1).at(5).value == -9223372036854775808.0);
  BOOST_TEST(report.tables.at(1).rows.at(1).at(2).text == "+17179869184.00 GiB");
  BOOST_TEST(*report.tables.at(1).rows.at(1).at(2).value == 18446744073709551615.0);
}

BOOST_AUTO_TEST_CASE(a_pipelined_runs_stages_are_not_summed) {
  // Three stages that run at once: the step is about the longest stage, the Pipeline
  // column holds the sends and receives with their waits, and the bubble is shown
  // planned, estimated and measured.
  r::Source s;
  s.file = "pipelined.json";
  s.kind = r::SourceKind::kRun;
  s.record.plan.estimated_step_seconds = 0.002;
  s.record.pipeline = r::PipelineRecord{3, 0.2, 0.383, 0.85};
  s.record.step_seconds = {0.02, 0.02};
  for (int k = 0; k < 3; ++k) {
    r::PhaseRecord phase;
    phase.name = "stage " + std::to_string(k);
    phase.planned_seconds = 0.001;
    phase.measured_seconds = 0.010 + 0.001 * k;
    phase.measured_by_kind = {0.002, 0.001, 0.0, 0.0, 0.007 + 0.001 * k};
    s.record.phases.push_back(phase);
  }
  const r::Report report = r::throughput_report({s});
  const r::Table& summary = report.tables.at(0);
  auto row = [](const r::Table& t, const std::string& name) {
    for (const auto& cells : t.rows)
      if (cells.at(0).text == name) return cells;
    BOOST_FAIL("no row " << name);
    return std::vector<r::Cell>{};
  };
  BOOST_TEST(row(summary, "pipeline bubble").at(1).text == "20.0%");
  BOOST_TEST(row(summary, "pipeline bubble").at(2).text == "85.0%");
  BOOST_TEST(row(summary, "pipeline bubble (estimated)").at(1).text == "38.3%");
  const r::Table& phases = report.tables.at(1);
  BOOST_TEST(phases.columns.back().title == "Pipeline");
  BOOST_TEST(row(phases, "stage 2").back().text == "9.000 ms");
  const auto step = row(phases, "step (stages at once)");
  BOOST_TEST(step.at(1).text == "2.000 ms");   // the plan's step
  BOOST_TEST(step.at(2).text == "12.000 ms");  // the longest stage
  for (const auto& cells : phases.rows) BOOST_TEST(cells.at(0).text != "total");
}

BOOST_AUTO_TEST_SUITE_END()

// Plan files (from the planner's own plan_to_json, examples/quick.yaml): estimates only,
// and mixed with runs in one comparison, the Source column saying which is which.
BOOST_AUTO_TEST_SUITE(plan_files)

BOOST_AUTO_TEST_CASE(memory_and_throughput_of_a_plan) {
  const auto sources = fixtures({"quick_plan.json"});
  BOOST_TEST((sources[0].kind == r::SourceKind::kPlan));
  const std::string memory = render(r::memory_report(sources), r::Format::kText);
  BOOST_TEST(memory == golden("plan_memory.txt", memory));
  const std::string throughput = render(r::throughput_report(sources), r::Format::kText);
  BOOST_TEST(throughput == golden("plan_throughput.txt", throughput));
}

BOOST_AUTO_TEST_CASE(compare_mixes_plans_and_runs) {
  const auto c = r::compare(fixtures({"quick_plan.json", "quick_onchip_plan.json", "base.json"}),
                            {"rts + remote (plan)", "on-chip (plan)", "tiny run"}, "");
  const auto report = r::compare_report(c);
  for (const NamedFormat& f : kFormats) {
    const std::string actual = render(report, f.format);
    BOOST_TEST(actual == golden(std::string("compare_mixed.") + f.extension, actual));
  }
}

BOOST_AUTO_TEST_CASE(plan_files_read_from_their_text_as_from_the_dom) {
  for (const char* name : {"quick_plan.json", "quick_onchip_plan.json"}) {
    const r::Source text =
        r::source_from_text(r::testing::read_text(r::testing::data_dir() + "/" + name), name);
    const r::Source dom = r::testing::fixture(name);
    BOOST_TEST((text.kind == r::SourceKind::kPlan));
    BOOST_TEST(r::run_record_to_json(text.record) == r::run_record_to_json(dom.record), name);
  }
  // A plan's errors stay input errors when its arrays are read while parsing.
  std::string text = r::testing::read_text(r::testing::data_dir() + "/quick_plan.json");
  text.replace(text.find("\"kind\": \"alloc\""), 15, "\"kind\": \"alloK\"");
  try {
    r::source_from_text(text, "p.json");
    BOOST_FAIL("no error");
  } catch (const popkit::reports::InputError& e) {
    BOOST_TEST(std::string(e.what()).rfind("p.json: phases[0].ops[0].kind: 'alloK' is not one of",
                                           0) == 0u,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(plan_file_errors_name_the_file_and_field) {
  nlohmann::json j = r::read_json_file(r::testing::data_dir() + "/quick_plan.json");
  j["version"] = 99;
  try {
    r::source_from_json(j, "p.json");
    BOOST_FAIL("no error");
  } catch (const popkit::reports::InputError& e) {
    BOOST_TEST(std::string(e.what()).rfind("p.json: version: ", 0) == 0u, e.what());
  }
  j = r::read_json_file(r::testing::data_dir() + "/quick_plan.json");
  j.erase("phases");
  try {
    r::source_from_json(j, "p.json");
    BOOST_FAIL("no error");
  } catch (const popkit::reports::InputError& e) {
    BOOST_TEST(std::string(e.what()).find("phases") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
