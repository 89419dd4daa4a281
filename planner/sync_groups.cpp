// The sync groups of each sync pattern; see sync_groups.h.
#include "planner/sync_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace popkit::planner {

SyncGroups sync_groups(config::SyncPattern pattern, std::int64_t replicas, std::int64_t stages) {
  const std::int64_t n = replicas * stages;
  SyncGroups g;
  std::vector<std::int64_t> all;
  for (std::int64_t d = 0; d < n; ++d) all.push_back(d);
  g.gs1.push_back(all);
  switch (pattern) {
    case config::SyncPattern::kFull:
      g.gs2.push_back(all);
      break;
    case config::SyncPattern::kSinglePipeline:
      for (std::int64_t d = 0; d < n; ++d) g.gs2.push_back({d});
      break;
    case config::SyncPattern::kReplicaAndLadder:
      for (std::int64_t parity = 0; parity < 2 && parity < n; ++parity) {
        std::vector<std::int64_t> set;
        for (std::int64_t d = parity; d < n; d += 2) set.push_back(d);
        g.gs2.push_back(set);
      }
      break;
  }
  return g;
}

std::string device_set_text(const std::vector<std::int64_t>& devices, std::size_t most) {
  if (devices.size() <= most) return fmt::format("{{{}}}", fmt::join(devices, ", "));
  const std::vector<std::int64_t> head(devices.begin(),
                                       devices.begin() + static_cast<std::ptrdiff_t>(most - 1));
  return fmt::format("{{{}, ..., {}}} ({} devices)", fmt::join(head, ", "), devices.back(),
                     devices.size());
}

}  // namespace popkit::planner
