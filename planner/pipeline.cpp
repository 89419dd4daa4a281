// The 1F1B schedule, its timing and diagram, and the balanced split into stages
// (pipeline.h).
#include "planner/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "base/error.h"

namespace popkit::planner {
namespace {

std::int64_t digits(std::int64_t n) {
  std::int64_t d = 1;
  for (; n >= 10; n /= 10) ++d;
  return d;
}

}  // namespace

double PipelineSchedule::bubble_fraction() const {
  if (stages == 0 || makespan == 0) return 0.0;
  std::int64_t busy = 0;
  for (const auto& slots : per_stage)
    for (const PipelineSlot& slot : slots) busy += slot.end - slot.start;
  return 1.0 - static_cast<double>(busy) / static_cast<double>(stages * makespan);
}

std::vector<PipelineSlot> one_f_one_b_order(std::int64_t stage, std::int64_t stages,
                                            std::int64_t micro_batches) {
  POPKIT_ASSERT(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1);
  const std::int64_t ramp_up = std::min(stages - 1 - stage, micro_batches);
  std::vector<PipelineSlot> order;
  order.reserve(static_cast<std::size_t>(2 * micro_batches));
  for (std::int64_t i = 0; i < ramp_up; ++i) order.push_back({PipelineWork::kForward, i});
  for (std::int64_t i = 0; i + ramp_up < micro_batches; ++i) {
    order.push_back({PipelineWork::kForward, i + ramp_up});
    order.push_back({PipelineWork::kBackward, i});
  }
  for (std::int64_t i = micro_batches - ramp_up; i < micro_batches; ++i)
    order.push_back({PipelineWork::kBackward, i});
  return order;
}

PipelineSchedule one_f_one_b(std::int64_t micro_batches, std::span<const std::int64_t> forward_time,
                             std::span<const std::int64_t> backward_time) {
  const auto stages = static_cast<std::int64_t>(forward_time.size());
  POPKIT_ASSERT(stages >= 1 && backward_time.size() == forward_time.size());
  PipelineSchedule schedule;
  schedule.stages = stages;
  schedule.micro_batches = micro_batches;
  for (std::int64_t s = 0; s < stages; ++s)
    schedule.per_stage.push_back(one_f_one_b_order(s, stages, micro_batches));
  time_slots(schedule, forward_time, backward_time);  // 1F1B cannot deadlock
  return schedule;
}

void time_slots(PipelineSchedule& schedule, std::span<const std::int64_t> forward_time,
                std::span<const std::int64_t> backward_time) {
  const std::int64_t stages = schedule.stages;
  const std::int64_t micro_batches = schedule.micro_batches;
  POPKIT_ASSERT(stages >= 1 && static_cast<std::int64_t>(schedule.per_stage.size()) == stages &&
                static_cast<std::int64_t>(forward_time.size()) == stages &&
                backward_time.size() == forward_time.size());
  for (std::int64_t s = 0; s < stages; ++s)
    POPKIT_ASSERT(forward_time[s] > 0 && backward_time[s] > 0);
  // When each stage's forward and backward of each micro-batch ends; -1 not yet timed.
  const auto n = static_cast<std::size_t>(stages * micro_batches);
  std::vector<std::int64_t> forward_end(n, -1), backward_end(n, -1);
  const auto at = [&](std::int64_t s, std::int64_t i) {
    return static_cast<std::size_t>(s * micro_batches + i);
  };
  // Time the stages' slots in their order, each once what it waits for has ended: a
  // pass over the stages times every slot whose dependency is timed, until all are.
  schedule.makespan = 0;
  std::vector<std::size_t> next(static_cast<std::size_t>(stages), 0);
  std::vector<std::int64_t> free_at(static_cast<std::size_t>(stages), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::int64_t s = 0; s < stages; ++s) {
      auto& slots = schedule.per_stage[static_cast<std::size_t>(s)];
      auto& k = next[static_cast<std::size_t>(s)];
      for (; k < slots.size(); ++k) {
        PipelineSlot& slot = slots[k];
        if (slot.micro_batch < 0 || slot.micro_batch >= micro_batches)
          throw Error("pipeline: stage {} works on micro-batch {} of {}", s, slot.micro_batch,
                      micro_batches);
        const bool forward = slot.work == PipelineWork::kForward;
        const std::int64_t ready = forward ? (s == 0 ? 0 : forward_end[at(s - 1, slot.micro_batch)])
                                   : s == stages - 1 ? forward_end[at(s, slot.micro_batch)]
                                                     : backward_end[at(s + 1, slot.micro_batch)];
        if (ready < 0) break;
        slot.start = std::max(ready, free_at[static_cast<std::size_t>(s)]);
        slot.end = slot.start + (forward ? forward_time[s] : backward_time[s]);
        free_at[static_cast<std::size_t>(s)] = slot.end;
        (forward ? forward_end : backward_end)[at(s, slot.micro_batch)] = slot.end;
        schedule.makespan = std::max(schedule.makespan, slot.end);
        progress = true;
      }
    }
  }
  schedule.stash_depth.clear();
  for (std::int64_t s = 0; s < stages; ++s) {
    const auto& slots = schedule.per_stage[static_cast<std::size_t>(s)];
    if (next[static_cast<std::size_t>(s)] != slots.size())
      throw Error(
          "pipeline: stage {}'s slot {} waits for work that waits for it (its order cannot run)", s,
          next[static_cast<std::size_t>(s)]);
    std::int64_t in_flight = 0, deepest = 0;
    for (const PipelineSlot& slot : slots) {
      in_flight += slot.work == PipelineWork::kForward ? 1 : -1;
      deepest = std::max(deepest, in_flight);
    }
    schedule.stash_depth.push_back(deepest);
  }
}

double ideal_bubble_fraction(std::int64_t stages, std::int64_t micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

std::string schedule_diagram(const PipelineSchedule& schedule) {
  const std::int64_t width = 1 + digits(std::max<std::int64_t>(schedule.micro_batches - 1, 0));
  const std::string stage_label = fmt::format("stage {}", schedule.stages - 1);
  std::string out;
  for (std::int64_t s = 0; s < schedule.stages; ++s) {
    std::vector<std::string> cells(static_cast<std::size_t>(schedule.makespan), ".");
    for (const PipelineSlot& slot : schedule.per_stage[static_cast<std::size_t>(s)])
      for (std::int64_t t = slot.start; t < slot.end; ++t)
        cells[static_cast<std::size_t>(t)] =
            fmt::format("{}{}", slot.work == PipelineWork::kForward ? 'F' : 'B', slot.micro_batch);
    std::string row = fmt::format("{:<{}} |", fmt::format("stage {}", s), stage_label.size());
    for (const std::string& cell : cells) row += fmt::format(" {:<{}}", cell, width);
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + '\n';
  }
  return out;
}

std::vector<std::int64_t> balance_stages(std::span<const double> layer_costs, std::int64_t stages) {
  const auto n = static_cast<std::int64_t>(layer_costs.size());
  if (stages < 1 || n < stages)
    throw Error("{} pipeline stages need at least {} layers, one per stage; the model has {}",
                stages, stages, n);
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
  std::partial_sum(layer_costs.begin(), layer_costs.end(), prefix.begin() + 1);
  const auto cost = [&](std::int64_t from, std::int64_t to) {  // layers [from, to)
    return prefix[static_cast<std::size_t>(to)] - prefix[static_cast<std::size_t>(from)];
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][j]: the cheapest costliest stage when layers [0, j) form k stages; first[k][j]
  // the first layer of the k-th of them in that split (the earliest such, on ties).
  const auto size = static_cast<std::size_t>(n) + 1;
  std::vector<std::vector<double>> best(static_cast<std::size_t>(stages) + 1,
                                        std::vector<double>(size, kInf));
  std::vector<std::vector<std::int64_t>> first(static_cast<std::size_t>(stages) + 1,
                                               std::vector<std::int64_t>(size, 0));
  best[0][0] = 0.0;
  for (std::int64_t k = 1; k <= stages; ++k)
    for (std::int64_t j = k; j <= n; ++j)
      for (std::int64_t i = k - 1; i < j; ++i) {
        const double worst = std::max(
            best[static_cast<std::size_t>(k - 1)][static_cast<std::size_t>(i)], cost(i, j));
        if (worst < best[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)]) {
          best[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)] = worst;
          first[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)] = i;
        }
      }
  std::vector<std::int64_t> starts(static_cast<std::size_t>(stages));
  for (std::int64_t k = stages, j = n; k >= 1; --k) {
    j = first[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)];
    starts[static_cast<std::size_t>(k - 1)] = j;
  }
  return starts;
}

}  // namespace popkit::planner
