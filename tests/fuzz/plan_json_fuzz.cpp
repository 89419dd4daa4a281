// libFuzzer target for the plan file reader: any bytes must give a Plan or a
// popkit::Error, never a crash, hang or sanitizer report. Two more checks: reading with
// the arrays split off while parsing (plan_from_text) gives exactly what reading the whole
// DOM gives, plan or error; and a plan read, written back and read again is the same plan.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "planner/json_text.h"
#include "planner/plan_json.h"

namespace {

using popkit::planner::Plan;

// A plan as its file; an error as its message.
std::string outcome(const std::optional<Plan>& plan, const std::string& error) {
  return plan ? popkit::planner::plan_to_json(*plan).dump() : "error: " + error;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace popkit::planner;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<Plan> plan;
  std::string error;
  try {
    plan = plan_from_text(text, "fuzz.json");
  } catch (const popkit::Error& e) {
    error = e.what();
  }

  std::optional<nlohmann::json> dom;
  try {
    dom = parse_json(text, "fuzz.json");
  } catch (const popkit::Error& e) {
    POPKIT_ASSERT(!plan && error == e.what());  // not JSON: the same error
    return 0;
  }
  std::optional<Plan> from_dom;
  std::string dom_error;
  try {
    from_dom = plan_from_json(*dom, "fuzz.json");
  } catch (const popkit::Error& e) {
    dom_error = e.what();
  }
  POPKIT_ASSERT(outcome(plan, error) == outcome(from_dom, dom_error));

  if (plan) {
    const std::string written = plan_to_json(*plan).dump();
    const Plan back = plan_from_text(written, "fuzz.json");
    POPKIT_ASSERT(plan_to_json(back).dump() == written);
  }
  return 0;
}
