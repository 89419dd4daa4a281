// Whether a plan's estimate can be shown; see estimate_check.h.
#include "planner/estimate_check.h"

#include <fmt/format.h>

#include <cmath>

namespace popkit::planner {

std::string estimate_problem(const Plan& plan) {
  const auto bad = [](double seconds) { return !std::isfinite(seconds) || seconds < 0; };
  std::string where;
  for (std::size_t p = 0; p < plan.phases.size() && where.empty(); ++p)
    if (bad(plan.phases[p].estimated_seconds))
      where = fmt::format(" (phase {}: {} at {} s)", p + 1, plan.phases[p].name,
                          plan.phases[p].estimated_seconds);
  if (where.empty() && !bad(plan.estimated_step_seconds) &&
      std::isfinite(plan.estimated_samples_per_second) && plan.estimated_samples_per_second > 0)
    return "";
  return fmt::format(
      "device profile '{}' prices this plan at {} s a step, {} samples/s{}: a figure of the "
      "profile is missing its partner or out of range (a rate near 0, say); fix the profile",
      plan.device_profile, plan.estimated_step_seconds, plan.estimated_samples_per_second, where);
}

}  // namespace popkit::planner
