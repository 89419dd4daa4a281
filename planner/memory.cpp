// The memory walk over setup and phases (see memory.h for the definition).
#include "planner/memory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>

#include "base/error.h"
#include "planner/names.h"
#include "planner/operands.h"

namespace popkit::planner {
namespace {

struct PhaseResult {
  PhaseMemory memory;
  std::int64_t peak_op = -1;
};

class Walker {
 public:
  // With snapshot_phase >= 0, records the live tensors after op `snapshot_op` of that
  // phase (-1: at its start).
  // A pipelined plan's stages are devices of their own: bytes are counted per stage, and
  // phase s (stage s's program) samples stage s's.
  Walker(const Plan& plan, int snapshot_phase = -1, std::int64_t snapshot_op = -1)
      : plan_(plan),
        live_(plan.tensors.size(), false),
        n_devices_(plan.pipeline ? plan.pipeline->stages.size() : 1),
        live_bytes_(n_devices_, 0),
        always_live_(n_devices_, 0),
        by_class_(n_devices_, ClassBytes{}),
        snapshot_phase_(snapshot_phase),
        snapshot_op_(snapshot_op) {}

  std::vector<PhaseResult> run() {
    std::vector<PhaseResult> results;
    where_ = "setup";
    for (std::size_t i = 0; i < plan_.setup.size(); ++i) {
      const Op& op = plan_.setup[i];
      op_index_ = i;
      if (op.kind == OpKind::kFree) fail(op, "setup never frees");
      if (op.kind == OpKind::kAlloc && !tensor(the_tensor(op), op).always_live)
        fail(op, fmt::format("setup allocates '{}', which is not always-live",
                             tensor(the_tensor(op), op).name));
      apply(op, false);
    }
    always_live_ = live_bytes_;
    in_phase_ = true;
    for (std::size_t p = 0; p < plan_.phases.size(); ++p) {
      const Phase& phase = plan_.phases[p];
      where_ = fmt::format("phase '{}'", phase.name);
      if (plan_.pipeline &&
          (phase.stage < 0 || static_cast<std::size_t>(phase.stage) >= n_devices_))
        throw Error("plan: {} has stage {}, not one of the {} pipeline stages", where_, phase.stage,
                    n_devices_);
      stage_ = plan_.pipeline ? static_cast<std::size_t>(phase.stage) : 0;
      const std::uint64_t& live_bytes = live_bytes_[stage_];
      const ClassBytes& by_class = by_class_[stage_];
      PhaseResult r;
      r.memory.peak = live_bytes;
      r.memory.peak_by_class = by_class;
      r.peak_op = -1;
      if (static_cast<int>(p) == snapshot_phase_ && snapshot_op_ < 0) take_snapshot();
      for (std::size_t i = 0; i < phase.ops.size(); ++i) {
        op_index_ = i;
        const Op& op = phase.ops[i];
        if (op.kind == OpKind::kAlloc && tensor(the_tensor(op), op).always_live)
          fail(op, fmt::format("'{}' is always-live and allocated by setup only",
                               tensor(the_tensor(op), op).name));
        apply(op, false);
        // Sample after the op (for a repeat: after each body op, all equal).
        if (live_bytes > r.memory.peak) {
          r.memory.peak = live_bytes;
          r.memory.peak_by_class = by_class;
          r.peak_op = static_cast<std::int64_t>(i);
        }
        if (static_cast<int>(p) == snapshot_phase_ && snapshot_op_ == static_cast<std::int64_t>(i))
          take_snapshot();
      }
      r.memory.always_live = always_live_[stage_];
      r.memory.not_always_live = r.memory.peak - always_live_[stage_];
      results.push_back(r);
    }
    for (std::size_t t = 0; t < live_.size(); ++t)
      if (live_[t] && !plan_.tensors[t].always_live)
        throw Error("plan: tensor '{}' is still live at the end of the step",
                    plan_.tensors[t].name);
    return results;
  }

  // The largest stage's (one device's): every device must hold its own.
  std::uint64_t always_live() const {
    return *std::max_element(always_live_.begin(), always_live_.end());
  }
  const std::vector<int>& snapshot() const { return snapshot_; }

 private:
  [[noreturn]] void fail(const Op& op, const std::string& what) const {
    throw Error("plan: {}, op {} ({}): {}", where_, op_index_, op_kind_name(op.kind), what);
  }

  const DeviceTensor& tensor(int t, const Op& op) const {
    if (t < 0 || static_cast<std::size_t>(t) >= plan_.tensors.size())
      fail(op, fmt::format("tensor index {} out of range", t));
    return plan_.tensors[static_cast<std::size_t>(t)];
  }

  void require_live(int t, const Op& op, bool in_repeat) const {
    if (t < 0) return;
    const DeviceTensor& d = tensor(t, op);
    if (!live_[static_cast<std::size_t>(t)])
      fail(op, fmt::format("uses '{}', which is not live", d.name));
    if (in_repeat && d.double_buffer >= 0) {
      if (static_cast<std::size_t>(d.double_buffer) >= live_.size() ||
          !live_[static_cast<std::size_t>(d.double_buffer)])
        fail(op, fmt::format("uses '{}', whose second slot is not live", d.name));
    }
  }

  // The op's operand lists have its kind's positions (planner/operands.h), each a
  // tensor of the plan or -1; the single tensor of alloc, free and the other
  // single-tensor kinds is never -1.
  void check_operands(const Op& op) const {
    if (const std::string error = operand_count_error(op, plan_); !error.empty()) fail(op, error);
    for_each_operand(op, [&](int t) { tensor(t, op); });
    if (plan_.pipeline && in_phase_) check_stages(op);
    const OpSignature sig = op_signature(op, plan_);
    const bool single = sig.inputs.size() + sig.outputs.size() + sig.state.size() == 1 &&
                        op.kind != OpKind::kRepeat;
    if (single && the_tensor(op) < 0) fail(op, "names no tensor");
  }

  // A stage's program touches its own device's tensors; a send writes the receive
  // buffer of the stage it names (a neighbour, or a tied parameter's other stage), and
  // only sends and receives have a peer.
  void check_stages(const Op& op) const {
    const bool transfer = op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
    if (transfer && (op.peer < 0 || static_cast<std::size_t>(op.peer) >= n_devices_ ||
                     static_cast<std::size_t>(op.peer) == stage_))
      fail(op, fmt::format("a {} on stage {} names stage {}, not another of the {} stages",
                           op_kind_name(op.kind), stage_, op.peer, n_devices_));
    auto expect = [&](int t, std::size_t stage) {
      const DeviceTensor& d = tensor(t, op);
      if (d.stage != static_cast<int>(stage))
        fail(op, fmt::format("uses '{}' of stage {} on stage {}", d.name, d.stage, stage));
    };
    if (op.kind == OpKind::kSend) {
      expect(op.inputs.at(0), stage_);
      expect(op.outputs.at(0), static_cast<std::size_t>(op.peer));
      return;
    }
    for_each_operand(op, [&](int t) { expect(t, stage_); });
  }

  void apply(const Op& op, bool in_repeat) {
    check_operands(op);
    switch (op.kind) {
      case OpKind::kAlloc: {
        if (in_repeat) fail(op, "a repeat body never allocates");
        const int t = the_tensor(op);
        const DeviceTensor& d = tensor(t, op);
        if (live_[static_cast<std::size_t>(t)])
          fail(op, fmt::format("'{}' is already live", d.name));
        live_[static_cast<std::size_t>(t)] = true;
        live_bytes_[device(d)] += d.nbytes;
        by_class_[device(d)][static_cast<std::size_t>(d.cls)] += d.nbytes;
        break;
      }
      case OpKind::kFree: {
        if (in_repeat) fail(op, "a repeat body never frees");
        if (!in_phase_) fail(op, "setup never frees");
        const int t = the_tensor(op);
        const DeviceTensor& d = tensor(t, op);
        if (!live_[static_cast<std::size_t>(t)])
          fail(op, fmt::format("frees '{}', which is not live", d.name));
        live_[static_cast<std::size_t>(t)] = false;
        live_bytes_[device(d)] -= d.nbytes;
        by_class_[device(d)][static_cast<std::size_t>(d.cls)] -= d.nbytes;
        break;
      }
      case OpKind::kRepeat:
        if (op.steps < 1) fail(op, fmt::format("repeat of {} steps", op.steps));
        for (const Op& inner : op.body) apply(inner, true);
        break;
      default:
        for_each_operand(op, [&](int t) { require_live(t, op, in_repeat); });
        break;
    }
  }

  void take_snapshot() {
    snapshot_.clear();
    for (std::size_t t = 0; t < live_.size(); ++t)
      if (live_[t]) snapshot_.push_back(static_cast<int>(t));
  }

  // The device whose bytes a tensor counts in: its stage's, or the one device.
  std::size_t device(const DeviceTensor& d) const {
    if (!plan_.pipeline) return 0;
    if (d.stage < 0 || static_cast<std::size_t>(d.stage) >= n_devices_)
      throw Error("plan: {}: tensor '{}' has stage {}, not one of the {} pipeline stages", where_,
                  d.name, d.stage, n_devices_);
    return static_cast<std::size_t>(d.stage);
  }

  const Plan& plan_;
  std::vector<bool> live_;
  std::size_t n_devices_ = 1;
  std::vector<std::uint64_t> live_bytes_;
  std::vector<std::uint64_t> always_live_;
  std::vector<ClassBytes> by_class_;
  std::size_t stage_ = 0;  // of the phase being walked
  bool in_phase_ = false;
  std::string where_;
  std::size_t op_index_ = 0;
  int snapshot_phase_ = -1;
  std::int64_t snapshot_op_ = -1;
  std::vector<int> snapshot_;
};

}  // namespace

MemoryWalk analyse_memory(Plan& plan) {
  Walker walker(plan);
  const std::vector<PhaseResult> results = walker.run();
  MemoryWalk walk;
  plan.always_live_bytes = walker.always_live();
  plan.peak_bytes = 0;
  plan.peak_phase = 0;
  for (std::size_t p = 0; p < results.size(); ++p) {
    plan.phases[p].memory = results[p].memory;
    walk.peak_op.push_back(results[p].peak_op);
    if (results[p].memory.peak > plan.peak_bytes) {
      plan.peak_bytes = results[p].memory.peak;
      plan.peak_phase = static_cast<int>(p);
    }
  }
  plan.streaming_bytes = 0;
  for (const auto& b : plan.buffers) plan.streaming_bytes += b.nbytes();
  return walk;
}

void check_plan(const Plan& plan) {
  Walker(plan).run();
}

std::vector<int> live_tensors_at_peak(const Plan& plan, const MemoryWalk& walk, int phase) {
  Walker walker(plan, phase, walk.peak_op.at(static_cast<std::size_t>(phase)));
  walker.run();
  std::vector<int> live = walker.snapshot();
  std::stable_sort(live.begin(), live.end(), [&](int a, int b) {
    return plan.tensors[static_cast<std::size_t>(a)].nbytes >
           plan.tensors[static_cast<std::size_t>(b)].nbytes;
  });
  return live;
}

}  // namespace popkit::planner
