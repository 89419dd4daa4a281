// libFuzzer target for popreport compare's --fail-if expressions ('throughput < -5%'):
// any bytes must give a Gate with a finite bound or an InputError, never a crash, hang
// or sanitizer report; a parsed gate then checks rows with ordinary, zero and huge
// figures without trouble.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "reports/compare.h"
#include "reports/input_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace popkit::reports;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Gate gate;
  try {
    gate = parse_gate(text);
  } catch (const InputError&) {
    return 0;
  }
  POPKIT_ASSERT(std::isfinite(gate.percent));
  POPKIT_ASSERT(gate.text == text);

  Comparison c;
  c.rows.resize(4);
  c.rows[0] = {"base", SourceKind::kRun, 0, 100.0, 0.5, 1000, 10, "measured on CPU", "CPU"};
  c.rows[1] = {"other", SourceKind::kRun, 64, 90.0, 0.6, 2000, 0, "measured on CPU", "CPU"};
  c.rows[2] = {"zero", SourceKind::kPlan, 0, 0.0, 0.0, 0, 0, "measured on CPU", "CPU"};
  c.rows[3] = {"huge",
               SourceKind::kPlan,
               1,
               1e308,
               1e300,
               ~std::uint64_t{0},
               ~std::uint64_t{0},
               "measured on CPU",
               "CPU"};
  for (std::size_t base = 0; base < c.rows.size(); ++base) {
    c.baseline = base;
    for (const std::string& failure : check_gates(c, {gate})) POPKIT_ASSERT(!failure.empty());
  }
  return 0;
}
