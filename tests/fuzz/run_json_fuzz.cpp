// libFuzzer target for the run file reader: any bytes must give a RunRecord or an
// InputError, never a crash, hang or sanitizer report. Also: reading with the measured
// memory split off while parsing gives exactly what reading the whole DOM gives; a record
// read, written back and read again is the same record; and popreport's own entry
// (source_from_text, a plan or a run) gives a Source or an InputError, and every report
// of a Source (tables in every format, the chart, the comparison and its gates) is made
// without trouble, whatever figures the file holds.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "reports/chart.h"
#include "reports/compare.h"
#include "reports/input_error.h"
#include "reports/json_reader.h"
#include "reports/memory_report.h"
#include "reports/run_record.h"
#include "reports/source.h"
#include "reports/throughput_report.h"

namespace {

using popkit::reports::RunRecord;

std::string outcome(const std::optional<RunRecord>& record, const std::string& error) {
  return record ? popkit::reports::run_record_to_json(*record).dump() : "error: " + error;
}

// Everything popreport makes of a file, compared with itself.
void report_on(const popkit::reports::Source& source) {
  using namespace popkit::reports;
  const std::vector<Source> sources{source, source};
  std::ostringstream out;
  const Comparison c = compare(sources, {"a", "b"}, "b");
  for (const Report& report :
       {memory_report(sources), throughput_report(sources), compare_report(c)}) {
    for (const Format format : {Format::kText, Format::kMarkdown, Format::kCsv, Format::kJson}) {
      write_report(report, format, out);
    }
  }
  for (const ChartKind kind : {ChartKind::kMemory, ChartKind::kThroughput, ChartKind::kCompare})
    write_chart(sources, kind, out);
  for (const char* gate : {"throughput < -5%", "execution_time > 5%", "peak_memory > +2%",
                           "streaming_memory < -0.5%"}) {
    check_gates(c, {parse_gate(gate)});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace popkit::reports;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<RunRecord> record;
  std::string error;
  try {
    record = run_record_from_text(text, "fuzz.json");
  } catch (const InputError& e) {
    error = e.what();
  }

  std::optional<Source> source;
  try {
    source = source_from_text(text, "fuzz.json");
  } catch (const InputError&) {
  }
  if (source) report_on(*source);

  std::optional<nlohmann::json> dom;
  try {
    dom = parse_input_json(text, "fuzz.json");
  } catch (const InputError& e) {
    POPKIT_ASSERT(!record && error == e.what());  // not JSON: the same error
    return 0;
  }
  std::optional<RunRecord> from_dom;
  std::string dom_error;
  try {
    from_dom = run_record_from_json(*dom, "fuzz.json");
  } catch (const InputError& e) {
    dom_error = e.what();
  }
  POPKIT_ASSERT(outcome(record, error) == outcome(from_dom, dom_error));

  if (record) {
    const std::string written = run_record_to_json(*record).dump();
    const RunRecord back = run_record_from_text(written, "fuzz.json");
    POPKIT_ASSERT(run_record_to_json(back).dump() == written);
  }
  return 0;
}
