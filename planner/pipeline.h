// Pipelined execution's schedule (issue 16, first step; docs/pipelining.md): which
// micro-batch each stage works on at each moment, how many micro-batches' activations
// a stage keeps (its stash), and how the layers split into stages.
//
// The schedule is 1F1B with a flush (PipeDream-Flush, the schedule Megatron-LM and
// DeepSpeed run): stage s of S runs S-1-s forwards to fill the pipeline (ramp-up), then
// alternates one forward and one backward (main), then drains its backwards (ramp-down).
// Chosen because each quantity the memory model needs has a closed form: a stage keeps
// the activations of at most min(S-s, GA) micro-batches, and with equal stage times the
// bubble is (S-1)/(GA+S-1), the figure the issue asks to measure against. Each stage
// runs its backwards in micro-batch order 0, 1, ..., GA-1, so its weight gradients
// accumulate in the order they do without pipelining, and the weights stay bitwise the
// same. The pipeline is flushed (every backward done) before the optimizer step: no
// stale weights.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace popkit::planner {

enum class PipelineWork { kForward, kBackward };

// One stage's work on one micro-batch, on the schedule's clock (integer time units).
struct PipelineSlot {
  PipelineWork work = PipelineWork::kForward;
  std::int64_t micro_batch = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;  // start + the stage's duration for this work
};

struct PipelineSchedule {
  std::int64_t stages = 0;
  std::int64_t micro_batches = 0;  // the gradient accumulation: micro-batches per step
  // Each stage's slots in the order the stage runs them.
  std::vector<std::vector<PipelineSlot>> per_stage;
  // The most micro-batches whose forward a stage has run and whose backward it has not:
  // the activations it must keep (its stash depth).
  std::vector<std::int64_t> stash_depth;
  std::int64_t makespan = 0;  // the end of the last backward

  // The idle share of the stages' time: 1 - busy / (stages * makespan).
  [[nodiscard]] double bubble_fraction() const;
};

// The slots a 1F1B stage runs, in order, before timing: `stages` - 1 - `stage`
// forwards (at most `micro_batches`), then one forward and one backward in turn, then the
// remaining backwards.
[[nodiscard]] std::vector<PipelineSlot> one_f_one_b_order(std::int64_t stage, std::int64_t stages,
                                                          std::int64_t micro_batches);

// The 1F1B schedule, timed: a forward of micro-batch i on stage s starts once stage s-1
// has finished that micro-batch's forward (the transfer between them is part of the
// sender's time), a backward once stage s+1 has finished its backward (the last stage:
// its own forward), and every slot once the stage's slot before it has ended.
// `forward_time[s]` and `backward_time[s]` are stage s's durations (time units, > 0).
[[nodiscard]] PipelineSchedule one_f_one_b(std::int64_t micro_batches,
                                           std::span<const std::int64_t> forward_time,
                                           std::span<const std::int64_t> backward_time);

// Times the slots of `schedule.per_stage` (each stage's order as given; `stages` and
// `micro_batches` set) by the rule above, and sets their stash depths and the makespan.
// Throws popkit::Error when an order names a micro-batch out of range or cannot run
// (a slot waits for work that waits for it).
void time_slots(PipelineSchedule& schedule, std::span<const std::int64_t> forward_time,
                std::span<const std::int64_t> backward_time);

// The planned bubble with equal stage times: (S - 1) / (GA + S - 1).
[[nodiscard]] double ideal_bubble_fraction(std::int64_t stages, std::int64_t micro_batches);

// Time x stage as text, one row per stage, one column per time unit: "F3" / "B3" for
// work on micro-batch 3 (each cell as wide as the largest micro-batch number needs),
// "." for idle. Stages with durations above one unit repeat the label over their span.
[[nodiscard]] std::string schedule_diagram(const PipelineSchedule& schedule);

// The contiguous split of the layers into `stages` stages that makes the costliest stage
// as cheap as it can be; each stage gets at least one layer. On ties the last stage starts
// as early as it can, then the one before it, and so on.
// Returns the index of each stage's first layer. Throws popkit::Error when there are
// fewer layers than stages.
[[nodiscard]] std::vector<std::int64_t> balance_stages(std::span<const double> layer_costs,
                                                       std::int64_t stages);

}  // namespace popkit::planner
