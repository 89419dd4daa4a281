// The time estimate of a plan (cost.h): each phase's ops priced by the Timer
// (op_timer.h) as the plan's schedule runs them, phases summed, a pipelined plan's
// stages timed by its 1F1B schedule, the network's share with a network profile, and
// the run of the program once a step (the profile's program_seconds).
#include "planner/cost.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "base/error.h"
#include "planner/collective_traffic.h"
#include "planner/op_timer.h"
#include "planner/pipeline.h"
#include "planner/schedule.h"
#include "planner/sync_groups.h"

namespace popkit::planner {
namespace {

// A phase's time: its ops one after another, except that the loads preloaded into it
// (execution.io_schedule: preload) move on the IO thread while the phase computes, so
// only their transfer beyond the phase's own time adds to it.
// phase = own + preload serial + max(0, preload bytes - own). On a CPU the schedule says
// whether the engine's IO thread takes them (planner/schedule.h); else they run in place.
double phase_seconds(const Phase& ph, const PhaseSchedule& schedule, const Timer& timer) {
  double own = 0.0;
  Seconds preload;
  const double ws = timer.working_set(ph.ops);
  const bool overlap = timer.preloads_overlap(schedule);
  auto item = schedule.ops.items.begin();
  for (std::size_t i = 0; i < ph.ops.size(); ++i) {
    const Op& op = ph.ops[i];
    while (item != schedule.ops.items.end() && item->end <= i) ++item;
    const bool repeat = item != schedule.ops.items.end() && item->first == i &&
                        item->kind == ScheduleItem::Kind::kRepeat;
    const Seconds t = timer.time(op, ws, 0.0, repeat ? &*item : nullptr);
    if (op.preload && overlap) {
      preload.serial += t.serial;
      preload.transfer += t.transfer;
    } else {
      own += t.total();
    }
  }
  own += timer.list_waits(ph.ops, schedule.ops);
  return own + preload.serial + std::max(0.0, preload.transfer - own);
}

// A pipelined step: each stage's head (before its first slot), its forward and backward
// slots (each the longest of its kind on the stage), and its tail (the reductions and
// the optimizer, after the flush); the slots timed by the 1F1B schedule in nanoseconds.
// Stages run at once on their own devices: step = longest head + the schedule's
// makespan + longest tail. Evaluation runs forwards only: stage s starts micro-batch i
// when stage s-1 has sent it and s has finished i-1, so the makespan is
// sum_s F_s + (GA - 1) max_s F_s. Each phase's estimate is its own stage's busy time.
// Under full the devices run the pipeline's cycles in lockstep (planner/sync_groups.h):
// a cycle lasts as long as its longest slot, and the makespan is the sum of those; on a
// CPU every meeting of a group adds a barrier.
// Fills `e`'s phase seconds and pipeline (a copy of the plan's, its estimates set).
double pipelined_step_seconds(const Plan& plan, const Timer& timer, StepEstimate& e) {
  e.pipeline = *plan.pipeline;
  PipelinePlan& pp = *e.pipeline;
  const auto S = static_cast<std::int64_t>(pp.stages.size());
  const std::int64_t ga = plan.gradient_accumulation;
  double head = 0.0, tail = 0.0;
  std::vector<std::int64_t> forward_ns, backward_ns;
  std::vector<std::vector<double>> slot_seconds;  // [phase][slot]
  bool has_backward = false;
  for (const Phase& ph : plan.phases) {
    PipelineStagePlan& st = pp.stages.at(static_cast<std::size_t>(ph.stage));
    st = PipelineStagePlan{st.first_layer, st.n_layers, st.stash_depth};
    const std::int64_t first = ph.slots.empty() ? 0 : ph.slots.front().first_op;
    const std::int64_t end = ph.slots.empty() ? 0 : ph.slots.back().end_op;
    double busy = 0.0;
    const double ws = timer.working_set(ph.ops);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(ph.ops.size()); ++i) {
      const double t = timer.time(ph.ops[static_cast<std::size_t>(i)], ws).total();
      busy += t;
      if (i < first) st.head_seconds += t;
      if (i >= end) st.tail_seconds += t;
    }
    auto& times = slot_seconds.emplace_back();
    for (const StageSlot& slot : ph.slots) {
      double t = 0.0;
      for (std::int64_t i = slot.first_op; i < slot.end_op; ++i)
        t += timer.time(ph.ops[static_cast<std::size_t>(i)], ws).total();
      times.push_back(t);
      double& d = slot.work == PipelineWork::kForward ? st.forward_seconds : st.backward_seconds;
      d = std::max(d, t);
      has_backward = has_backward || slot.work == PipelineWork::kBackward;
    }
    e.phase_seconds.push_back(busy);
    head = std::max(head, st.head_seconds);
    tail = std::max(tail, st.tail_seconds);
  }
  const auto ns = [](double seconds) {
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(seconds * 1e9 + 0.5));
  };
  for (const PipelineStagePlan& st : pp.stages) {
    forward_ns.push_back(ns(st.forward_seconds));
    backward_ns.push_back(ns(st.backward_seconds));
  }
  pp.planned_bubble = ideal_bubble_fraction(S, ga);
  const bool alone = plan.replication_factor * S == 1;
  std::optional<PipelineCycles> cycles;
  if (plan.sync_pattern != config::SyncPattern::kSinglePipeline && !alone)
    cycles = pipeline_cycles(plan);
  double makespan = 0.0;
  if (cycles && plan.sync_pattern == config::SyncPattern::kFull) {
    // Lockstep: a cycle lasts as long as its longest slot.
    std::vector<double> longest(static_cast<std::size_t>(cycles->cycles), 0.0);
    double busy = 0.0;
    for (std::size_t p = 0; p < slot_seconds.size(); ++p)
      for (std::size_t k = 0; k < slot_seconds[p].size(); ++k) {
        double& l = longest[static_cast<std::size_t>(cycles->slot_cycle[p][k])];
        l = std::max(l, slot_seconds[p][k]);
        busy += slot_seconds[p][k];
      }
    for (const double l : longest) makespan += l;
    pp.estimated_bubble = makespan > 0 ? 1.0 - busy / (static_cast<double>(S) * makespan) : 0.0;
  } else if (has_backward) {
    const PipelineSchedule schedule = one_f_one_b(ga, forward_ns, backward_ns);
    pp.estimated_bubble = schedule.bubble_fraction();
    makespan = static_cast<double>(schedule.makespan) * 1e-9;
  } else {
    double sum = 0.0, most = 0.0;
    for (const PipelineStagePlan& st : pp.stages) {
      sum += st.forward_seconds;
      most = std::max(most, st.forward_seconds);
    }
    makespan = sum + static_cast<double>(ga - 1) * most;
    pp.estimated_bubble =
        makespan > 0 ? 1.0 - static_cast<double>(ga) * sum / (static_cast<double>(S) * makespan)
                     : 0.0;
  }
  if (cycles) {
    std::size_t meetings = 0;
    for (const auto& m : cycles->meetings) meetings = std::max(meetings, m.cycles.size());
    makespan += static_cast<double>(meetings) * timer.cycle_meeting_seconds();
  }
  return head + makespan + tail;
}

// The threads the engine would run the plan on: a CPU profile's, else one per replica
// (whose waits the Timer does not price).
RunThreads run_threads(const Plan& plan, const DeviceProfile& profile) {
  RunThreads run;
  run.replicas = plan.replication_factor;
  if (profile.is_cpu()) {
    const int cores = static_cast<int>(profile.host_threads);
    const std::int64_t stages =
        plan.pipeline ? static_cast<std::int64_t>(plan.pipeline->stages.size()) : 1;
    run.cores = cores;
    run.threads = compute_threads(cores, plan.replication_factor, stages);
  }
  return run;
}

StepEstimate step_estimate(const Plan& plan, const DeviceProfile& profile, const Schedule& schedule,
                           TrafficCount* traffic) {
  const std::int64_t io_tiles = plan.io_tiles;
  // IO tiles stream data; the rest compute (PopXL io_tiles).
  double fraction = 1.0;
  if (plan.io_mode != IoMode::kCompute && io_tiles > 0 && io_tiles < profile.tiles)
    fraction = static_cast<double>(profile.tiles - io_tiles) / static_cast<double>(profile.tiles);
  const Timer timer(plan, profile, fraction, traffic, schedule);
  StepEstimate e;
  if (plan.pipeline) {
    e.step_seconds = pipelined_step_seconds(plan, timer, e);
  } else {
    for (std::size_t p = 0; p < plan.phases.size(); ++p) {
      e.phase_seconds.push_back(phase_seconds(plan.phases[p], schedule.phases[p], timer));
      e.step_seconds += e.phase_seconds.back();
    }
  }
  return e;
}

NetworkEstimate network_estimate(const Plan& plan, const NetworkProfile& network,
                                 TrafficCount& traffic) {
  NetworkEstimate n;
  n.replicas_per_host = network.replicas_per_host;
  n.n_hosts = network.n_hosts(plan.replication_factor);
  n.bytes_per_second = network.bytes_per_second;
  n.latency_seconds = network.latency_seconds;
  CollectiveTraffic sum;
  for (const Phase& ph : plan.phases)
    for (const Op& op : ph.ops) {
      const CollectiveTraffic t = traffic.count(op);
      sum.on_host_bytes += t.on_host_bytes;
      sum.cross_host_bytes += t.cross_host_bytes;
      sum.busiest_link_bytes += t.busiest_link_bytes;
      sum.busiest_messages += t.busiest_messages;
    }
  const auto r = static_cast<std::uint64_t>(plan.replication_factor);
  n.on_host_bytes = sum.on_host_bytes / r;
  n.cross_host_bytes = sum.cross_host_bytes / r;
  n.network_bytes = sum.cross_host_bytes / 2;
  n.busiest_link_bytes = sum.busiest_link_bytes;
  n.messages = sum.busiest_messages;
  return n;
}

}  // namespace

StepEstimate estimate_step(const Plan& plan, const DeviceProfile& profile,
                           const NetworkProfile* network) {
  const Schedule schedule = planner::schedule(plan, run_threads(plan, profile));
  StepEstimate e = step_estimate(plan, profile, schedule, nullptr);
  if (network != nullptr) {
    // The step on one host first: what the network adds is the difference.
    const double one_host = e.step_seconds;
    TrafficCount traffic(plan, *network);
    e = step_estimate(plan, profile, schedule, &traffic);
    e.network = network_estimate(plan, *network, traffic);
    e.network->seconds = e.step_seconds - one_host;
  }
  // The run of the program itself, once a step (a training step, an evaluation batch):
  // the host launches it and waits for its end, whatever its ops.
  e.step_seconds += profile.program_seconds;
  e.samples_per_second =
      e.step_seconds > 0 ? static_cast<double>(plan.global_batch_size) / e.step_seconds : 0.0;
  return e;
}

void record_estimate(Plan& plan, const StepEstimate& e) {
  POPKIT_ASSERT(e.phase_seconds.size() == plan.phases.size());
  for (std::size_t p = 0; p < plan.phases.size(); ++p)
    plan.phases[p].estimated_seconds = e.phase_seconds[p];
  if (e.pipeline) plan.pipeline = e.pipeline;
  plan.estimated_step_seconds = e.step_seconds;
  plan.estimated_samples_per_second = e.samples_per_second;
  plan.network = e.network;
}

void estimate_time(Plan& plan, const DeviceProfile& profile, const NetworkProfile* network) {
  record_estimate(plan, estimate_step(plan, profile, network));
}

}  // namespace popkit::planner
