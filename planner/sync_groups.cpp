// The sync groups of each sync pattern; see sync_groups.h.
#include "planner/sync_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/error.h"
#include "planner/pipeline.h"

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

PipelineCycles pipeline_cycles(const Plan& plan) {
  POPKIT_ASSERT(plan.pipeline.has_value());
  const auto S = static_cast<std::int64_t>(plan.pipeline->stages.size());
  const std::int64_t R = plan.replication_factor;
  PipelineCycles out;
  out.groups = sync_groups(plan.sync_pattern, R, S);
  PipelineSchedule schedule;
  schedule.stages = S;
  schedule.per_stage.resize(static_cast<std::size_t>(S));
  for (const Phase& ph : plan.phases)
    for (const StageSlot& slot : ph.slots) {
      schedule.per_stage.at(static_cast<std::size_t>(ph.stage))
          .push_back({slot.work, slot.micro_batch, 0, 0});
      // Training runs GA micro-batches a step, evaluation its batches: the slots say.
      schedule.micro_batches = std::max(schedule.micro_batches, slot.micro_batch + 1);
    }
  const std::vector<std::int64_t> one(static_cast<std::size_t>(S), 1);
  time_slots(schedule, one, one);
  out.cycles = schedule.makespan;
  // Which cycles each stage starts a slot holding a syncing transfer in.
  const bool full = plan.sync_pattern == config::SyncPattern::kFull;
  std::vector<std::vector<std::int64_t>> syncs_at(static_cast<std::size_t>(S));
  for (const Phase& ph : plan.phases) {
    auto& cycles = out.slot_cycle.emplace_back();
    std::vector<std::size_t> next(static_cast<std::size_t>(S), 0);
    for (const StageSlot& slot : ph.slots) {
      const auto s = static_cast<std::size_t>(ph.stage);
      const std::int64_t t = schedule.per_stage[s][next[s]++].start;
      cycles.push_back(t);
      bool syncs = false;
      for (std::int64_t i = slot.first_op; i < slot.end_op; ++i) {
        const OpKind k = ph.ops[static_cast<std::size_t>(i)].kind;
        syncs = syncs || k == OpKind::kHostLoad || k == OpKind::kHostStore ||
                (full && (k == OpKind::kSend || k == OpKind::kRecv));
      }
      if (syncs) syncs_at[s].push_back(t);
    }
  }
  out.group_of.assign(static_cast<std::size_t>(R * S), -1);
  for (const auto& members : out.groups.gs2) {
    if (members.size() < 2) continue;  // a device alone waits for no one
    PipelineCycles::Meeting m{members, {}};
    // The cycles of each stage among the members, once: a member's are its stage's (a
    // list per member was R x S x GA cycles to sort: minutes at R 65,536).
    std::vector<bool> stage_met(static_cast<std::size_t>(S), false);
    for (const std::int64_t d : members) {
      out.group_of[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(out.meetings.size());
      stage_met[static_cast<std::size_t>(d % S)] = true;
    }
    for (std::size_t s = 0; s < stage_met.size(); ++s)
      if (stage_met[s]) m.cycles.insert(m.cycles.end(), syncs_at[s].begin(), syncs_at[s].end());
    std::sort(m.cycles.begin(), m.cycles.end());
    m.cycles.erase(std::unique(m.cycles.begin(), m.cycles.end()), m.cycles.end());
    out.meetings.push_back(std::move(m));
  }
  return out;
}

std::string device_set_text(const std::vector<std::int64_t>& devices, std::size_t most) {
  if (devices.size() <= most) return fmt::format("{{{}}}", fmt::join(devices, ", "));
  const std::vector<std::int64_t> head(devices.begin(),
                                       devices.begin() + static_cast<std::ptrdiff_t>(most - 1));
  return fmt::format("{{{}, ..., {}}} ({} devices)", fmt::join(head, ", "), devices.back(),
                     devices.size());
}

}  // namespace popkit::planner
