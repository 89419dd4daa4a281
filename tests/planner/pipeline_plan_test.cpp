// Pipelined plans (issue 16 item 2): one program per stage, each in 1F1B order with its
// stash, transfers as ops with their bytes, the flush before the optimizer, memory per
// stage in closed form, the FLOP-balanced placement, and the sync groups.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "planner/build.h"
#include "planner/layer_ops.h"
#include "planner/memory.h"
#include "planner/operands.h"
#include "planner/pipeline.h"
#include "planner/plan_json.h"
#include "planner/plan_text.h"
#include "planner/sync_groups.h"
#include "tests/planner/configs.h"

using namespace popkit::planner;
using popkit::config::Config;

namespace {

// The MNIST model (fc2, fc3 share a graph) in standard mode, nothing remote.
Config pipelined(std::int64_t stages, std::int64_t replicas, bool sharded) {
  Config c = test::mnist_phased();
  c.execution.mode = popkit::config::ExecutionMode::kStandard;
  c.remote = {};
  c.replication.factor = replicas;
  c.replication.groupings = {{"everyone", replicas, 1}};
  c.sharding.enabled = sharded && replicas > 1;
  c.training.gradient_accumulation = 2 * stages + 1;
  c.pipeline.stages = stages;
  return c;
}

const Phase& stage_program(const Plan& p, int s) {
  for (const Phase& ph : p.phases)
    if (ph.stage == s) return ph;
  throw std::runtime_error("no stage program");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pipeline_plan)

// Every stage's slots are 1F1B's order; each slot holds its layers' forwards (or
// backwards, in reverse), framed by the receive and the send; each micro-batch's
// forward and backward run exactly once per layer; the optimizer follows the last slot.
BOOST_AUTO_TEST_CASE(stage_programs_follow_one_f_one_b) {
  for (std::int64_t S = 2; S <= 4; ++S)
    for (std::int64_t R : {1, 2})
      for (bool sharded : {false, true}) {
        BOOST_TEST_CONTEXT("S " << S << " R " << R << " sharded " << sharded) {
          const Plan p = build_plan(pipelined(S, R, sharded));
          BOOST_REQUIRE(p.pipeline);
          BOOST_REQUIRE_EQUAL(p.phases.size(), static_cast<std::size_t>(S));
          const std::int64_t ga = p.gradient_accumulation;
          std::map<std::pair<int, int>, int> forwards, backwards;  // (layer, micro-batch)
          int first_layer = 0;
          for (int s = 0; s < S; ++s) {
            const Phase& ph = stage_program(p, s);
            const PipelineStagePlan& st = p.pipeline->stages[static_cast<std::size_t>(s)];
            BOOST_TEST(st.first_layer == first_layer);
            first_layer += st.n_layers;
            BOOST_TEST(st.stash_depth == std::min<std::int64_t>(S - s, ga));
            const auto order = one_f_one_b_order(s, S, ga);
            BOOST_REQUIRE_EQUAL(ph.slots.size(), order.size());
            for (std::size_t i = 0; i < order.size(); ++i) {
              const StageSlot& slot = ph.slots[i];
              BOOST_TEST((slot.work == order[i].work));
              BOOST_TEST(slot.micro_batch == order[i].micro_batch);
              const auto mb = static_cast<int>(slot.micro_batch);
              for (std::int64_t o = slot.first_op; o < slot.end_op; ++o) {
                const Op& op = ph.ops[static_cast<std::size_t>(o)];
                if (op.kind == OpKind::kForward) ++forwards[{op.layer, mb}];
                if (op.kind == OpKind::kBackward) ++backwards[{op.layer, mb}];
                BOOST_TEST((op.kind != OpKind::kOptimizerStep && op.kind != OpKind::kAllReduce &&
                            op.kind != OpKind::kReduceScatter));
              }
              const Op& front = ph.ops[static_cast<std::size_t>(slot.first_op)];
              const Op& back = ph.ops[static_cast<std::size_t>(slot.end_op - 1)];
              if (slot.work == PipelineWork::kForward) {
                BOOST_TEST(
                    (s == 0 ? front.kind == OpKind::kHostLoad : front.kind == OpKind::kRecv));
                if (s + 1 < S) BOOST_TEST((back.kind == OpKind::kSend && back.peer == s + 1));
              } else {
                if (s + 1 < S) BOOST_TEST((front.kind == OpKind::kRecv && front.peer == s + 1));
                if (s > 0) BOOST_TEST((back.kind == OpKind::kSend && back.peer == s - 1));
              }
            }
            // The flush: every optimizer step after the last slot.
            for (std::size_t o = 0; o < ph.ops.size(); ++o)
              if (ph.ops[o].kind == OpKind::kOptimizerStep)
                BOOST_TEST(static_cast<std::int64_t>(o) >= ph.slots.back().end_op);
          }
          BOOST_TEST(first_layer == static_cast<int>(p.layers.size()));
          for (int k = 0; k < static_cast<int>(p.layers.size()); ++k)
            for (int i = 0; i < static_cast<int>(ga); ++i) {
              BOOST_TEST(forwards[std::make_pair(k, i)] == 1);
              BOOST_TEST(backwards[std::make_pair(k, i)] == 1);
            }
        }
      }
}

// The stash: a backward reads the input and pre-activation its own micro-batch's
// forward wrote, and no forward in between overwrites them.
BOOST_AUTO_TEST_CASE(backward_reads_what_its_forward_stashed) {
  for (std::int64_t S = 2; S <= 4; ++S) {
    const Plan p = build_plan(pipelined(S, 1, false));
    for (const Phase& ph : p.phases) {
      std::map<int, int> written_by;  // tensor -> micro-batch of the last write
      for (const StageSlot& slot : ph.slots)
        for (std::int64_t o = slot.first_op; o < slot.end_op; ++o) {
          const Op& op = ph.ops[static_cast<std::size_t>(o)];
          const auto mb = static_cast<int>(slot.micro_batch);
          if (op.kind == OpKind::kBackward) {
            const LayerKind& kind = layer_kind(p.layers[static_cast<std::size_t>(op.layer)].kind);
            for (int t : {layer_operand(op, kind, OperandRole::kIn),
                          layer_operand(op, kind, OperandRole::kSaved, 0)})
              if (t >= 0) BOOST_TEST(written_by.at(t) == mb, ph.name << " " << op.label);
          }
          if (op.kind != OpKind::kBackward)
            for (int t : op.outputs)
              if (t >= 0) written_by[t] = mb;
        }
    }
  }
}

// Transfers: a send per micro-batch and direction into the neighbour's receive buffer,
// its bytes those of a micro-batch of activations; as many receives on the other side.
BOOST_AUTO_TEST_CASE(transfers_are_ops_with_their_bytes) {
  const Plan p = build_plan(pipelined(3, 2, true));
  const std::int64_t ga = p.gradient_accumulation;
  std::map<std::pair<int, int>, int> sends, recvs;  // (from, to)
  for (const Phase& ph : p.phases)
    for (const Op& op : ph.ops) {
      if (op.kind == OpKind::kSend) {
        ++sends[{ph.stage, op.peer}];
        const DeviceTensor& dst = p.tensors[static_cast<std::size_t>(op.outputs[0])];
        BOOST_TEST(dst.stage == op.peer);
        BOOST_TEST(dst.always_live);
        BOOST_TEST(op.pipeline_bytes == dst.nbytes);
        BOOST_TEST(op.pipeline_bytes == static_cast<std::uint64_t>(p.micro_batch_size * 512 * 4));
      }
      if (op.kind == OpKind::kRecv) ++recvs[{op.peer, ph.stage}];
    }
  for (int s = 0; s + 1 < 3; ++s) {
    BOOST_TEST(sends[std::make_pair(s, s + 1)] == ga);
    BOOST_TEST(sends[std::make_pair(s + 1, s)] == ga);
    BOOST_TEST(recvs[std::make_pair(s, s + 1)] == ga);
    BOOST_TEST(recvs[std::make_pair(s + 1, s)] == ga);
  }
}

// Without sharding every stage tensor is allocated before the first slot and freed
// after it or by the optimizer, so a stage's peak is the sum of its tensors; the stash
// holds stash_depth copies of each kept input and pre-activation.
BOOST_AUTO_TEST_CASE(memory_per_stage_in_closed_form) {
  for (std::int64_t S = 2; S <= 4; ++S) {
    const Plan p = build_plan(pipelined(S, 2, false));
    for (const Phase& ph : p.phases) {
      std::uint64_t sum = 0;
      std::map<std::string, int> stash;  // "fc2.in" -> slots
      for (const DeviceTensor& t : p.tensors) {
        if (t.stage != ph.stage) continue;
        sum += t.nbytes;
        const auto bracket = t.name.find('[');
        if (bracket != std::string::npos) ++stash[t.name.substr(0, bracket)];
      }
      BOOST_TEST(ph.memory.peak == sum, ph.name);
      const auto depth = p.pipeline->stages[static_cast<std::size_t>(ph.stage)].stash_depth;
      BOOST_TEST(!stash.empty());
      for (const auto& [name, n] : stash) BOOST_TEST(n == depth, name);
    }
    std::uint64_t most = 0;
    for (const Phase& ph : p.phases) most = std::max(most, ph.memory.peak);
    BOOST_TEST(p.peak_bytes == most);
  }
}

// auto balances forward + backward FLOPs: 784x512 against three much smaller layers
// puts fc1 alone on stage 0; an explicit placement is kept as written.
BOOST_AUTO_TEST_CASE(placement_auto_and_explicit) {
  const Plan p = build_plan(pipelined(2, 1, false));
  BOOST_TEST(p.pipeline->placement_auto);
  BOOST_TEST(p.pipeline->stages[0].n_layers == 1);
  BOOST_TEST(p.pipeline->stages[1].n_layers == 3);
  Config c = pipelined(2, 1, false);
  c.pipeline.placement_auto = false;
  c.pipeline.placement = {{"fc1", "fc2", "fc3"}, {"fc4"}};
  const Plan q = build_plan(c);
  BOOST_TEST(!q.pipeline->placement_auto);
  BOOST_TEST(q.pipeline->stages[0].n_layers == 3);
  BOOST_TEST(q.pipeline->stages[1].first_layer == 3);
  BOOST_TEST(q.phases[0].name == "stage 0: fc1 fc2 fc3");
}

// The estimate: the step covers every stage's work, the bubble is the planned one's
// closed form, and the estimated bubble is that of the timed schedule.
BOOST_AUTO_TEST_CASE(estimate_and_bubble) {
  const Plan p = build_plan(pipelined(3, 1, false));
  const std::int64_t ga = p.gradient_accumulation;
  BOOST_TEST(p.pipeline->planned_bubble == ideal_bubble_fraction(3, ga));
  for (const Phase& ph : p.phases) BOOST_TEST(p.estimated_step_seconds >= ph.estimated_seconds);
  double slowest = 0.0;
  for (const auto& st : p.pipeline->stages)
    slowest = std::max(slowest, st.forward_seconds + st.backward_seconds);
  BOOST_TEST(p.estimated_step_seconds >= static_cast<double>(ga) * slowest);
  BOOST_TEST(p.pipeline->estimated_bubble > 0.0);
  BOOST_TEST(p.pipeline->estimated_bubble < 1.0);
}

// Evaluation: forwards only, the weights on the stages training gives them.
BOOST_AUTO_TEST_CASE(evaluation_plan_is_pipelined_too) {
  const Config c = pipelined(3, 2, true);
  const Plan train = build_plan(c);
  const Plan eval = build_plan(c, Program::kEval);
  BOOST_REQUIRE(eval.pipeline);
  for (std::size_t s = 0; s < 3; ++s)
    BOOST_TEST(eval.pipeline->stages[s].first_layer == train.pipeline->stages[s].first_layer);
  for (const Phase& ph : eval.phases) {
    BOOST_TEST(ph.slots.size() == static_cast<std::size_t>(eval.gradient_accumulation));
    for (const StageSlot& slot : ph.slots) BOOST_TEST((slot.work == PipelineWork::kForward));
  }
  BOOST_TEST(eval.pipeline->stages.back().stash_depth == 1);
}

// A plan file keeps the stages, the slots, the transfers and the sync pattern.
BOOST_AUTO_TEST_CASE(json_round_trip) {
  Config c = pipelined(3, 2, true);
  c.execution.sync_pattern = popkit::config::SyncPattern::kReplicaAndLadder;
  const Plan p = build_plan(c);
  const auto j = plan_to_json(p);
  const Plan q = plan_from_json(j, "pipelined.json");
  BOOST_TEST(plan_to_json(q).dump() == j.dump());
  BOOST_TEST((q.sync_pattern == popkit::config::SyncPattern::kReplicaAndLadder));
  BOOST_TEST(q.phases[1].slots.size() == p.phases[1].slots.size());
}

// A stage program that touches another stage's tensor is refused by the walk.
BOOST_AUTO_TEST_CASE(walk_refuses_a_tensor_of_another_stage) {
  Plan p = build_plan(pipelined(2, 1, false));
  for (Op& op : p.phases[1].ops)
    if (op.kind == OpKind::kForward) {
      op.inputs[1] = p.variables[0].device_tensor;  // fc1.weight (linear's input 1), stage 0
      break;
    }
  BOOST_CHECK_EXCEPTION(check_plan(p), popkit::Error, [](const popkit::Error& e) {
    return std::string(e.what()).find("uses 'fc1.weight' of stage 0 on stage 1") !=
           std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(sync_groups_per_pattern) {
  using popkit::config::SyncPattern;
  const SyncGroups ladder = sync_groups(SyncPattern::kReplicaAndLadder, 2, 2);
  BOOST_TEST(ladder.gs1 == (std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}}));
  BOOST_TEST(ladder.gs2 == (std::vector<std::vector<std::int64_t>>{{0, 2}, {1, 3}}));
  BOOST_TEST(sync_groups(SyncPattern::kFull, 2, 2).gs2 ==
             (std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}}));
  BOOST_TEST(sync_groups(SyncPattern::kSinglePipeline, 1, 3).gs2 ==
             (std::vector<std::vector<std::int64_t>>{{0}, {1}, {2}}));
  BOOST_TEST(device_set_text({0, 1, 2}) == "{0, 1, 2}");
  std::vector<std::int64_t> many;
  for (std::int64_t d = 0; d < 512; d += 2) many.push_back(d);
  BOOST_TEST(device_set_text(many) == "{0, 2, 4, 6, 8, 10, 12, ..., 510} (256 devices)");
}

// The cycles are 1F1B with unit slots: S 2, GA 5 runs F0 on stage 0 at cycle 0, on stage 1
// at cycle 1, and ends at 2 (GA + S - 1) = 12. full meets at every cycle a slot starts
// in (each holds a transfer); replica_and_ladder (R 1 x S 3: stages 0 and 2 share a set,
// stage 1 alone) at the cycles where stage 0 loads images or stage 2 labels; and a slot's
// receive always comes a cycle after the send it takes.
BOOST_AUTO_TEST_CASE(pipeline_cycles_time_the_slots_and_the_meetings) {
  using popkit::config::SyncPattern;
  Config c = pipelined(2, 1, false);
  c.execution.sync_pattern = SyncPattern::kFull;
  const Plan two = build_plan(c);
  const PipelineCycles full = pipeline_cycles(two);
  BOOST_TEST(full.cycles == 2 * (two.gradient_accumulation + 1));
  BOOST_TEST(full.slot_cycle.at(0).front() == 0);
  BOOST_TEST(full.slot_cycle.at(1).front() == 1);
  BOOST_REQUIRE_EQUAL(full.meetings.size(), 1u);
  std::vector<std::int64_t> every(static_cast<std::size_t>(full.cycles));
  std::iota(every.begin(), every.end(), 0);
  BOOST_TEST(full.meetings[0].cycles == every);
  BOOST_TEST(full.group_of == (std::vector<std::int64_t>{0, 0}));

  c = pipelined(3, 1, false);
  c.execution.sync_pattern = SyncPattern::kReplicaAndLadder;
  const Plan three = build_plan(c);
  const PipelineCycles ladder = pipeline_cycles(three);
  BOOST_TEST(ladder.group_of == (std::vector<std::int64_t>{0, -1, 0}));
  std::vector<std::int64_t> loads;  // the cycles of stage 0's and stage 2's forwards
  for (std::size_t p = 0; p < three.phases.size(); ++p)
    for (std::size_t k = 0; k < three.phases[p].slots.size(); ++k)
      if (three.phases[p].stage != 1 && three.phases[p].slots[k].work == PipelineWork::kForward)
        loads.push_back(ladder.slot_cycle[p][k]);
  std::sort(loads.begin(), loads.end());
  loads.erase(std::unique(loads.begin(), loads.end()), loads.end());
  BOOST_REQUIRE_EQUAL(ladder.meetings.size(), 1u);
  BOOST_TEST(ladder.meetings[0].cycles == loads);
  // Each micro-batch's forward crosses one stage a cycle.
  for (std::size_t p = 0; p < three.phases.size(); ++p)
    for (std::size_t k = 0; k < three.phases[p].slots.size(); ++k) {
      const StageSlot& slot = three.phases[p].slots[k];
      if (slot.work == PipelineWork::kForward)
        BOOST_TEST(ladder.slot_cycle[p][k] >= slot.micro_batch + three.phases[p].stage);
    }
}

BOOST_AUTO_TEST_CASE(an_order_that_cannot_run_is_an_error) {
  // Stage 0 runs the backward of micro-batch 0 before its forward: it would wait for
  // stage 1's backward, which waits for stage 0's forward.
  PipelineSchedule s;
  s.stages = 2;
  s.micro_batches = 1;
  s.per_stage = {{{PipelineWork::kBackward, 0}, {PipelineWork::kForward, 0}},
                 {{PipelineWork::kForward, 0}, {PipelineWork::kBackward, 0}}};
  const std::vector<std::int64_t> one{1, 1};
  BOOST_CHECK_EXCEPTION(time_slots(s, one, one), popkit::Error, [](const popkit::Error& e) {
    return std::string(e.what()).find("stage 0's slot 0 waits for work that waits for it") !=
           std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
