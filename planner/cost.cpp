// FLOP and byte counts per op, and the time estimate.
#include "planner/cost.h"

#include <algorithm>

#include "planner/layer_kinds.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"

namespace popkit::planner {
namespace {

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

class Costs {
 public:
  explicit Costs(Plan& plan) : plan_(plan) {}

  void annotate(Op& op) {
    op.flops = op.host_bytes = op.remote_bytes = op.collective_bytes = 0;
    switch (op.kind) {
      case OpKind::kHostLoad:
      case OpKind::kHostStore:
        op.host_bytes = bytes(the_tensor(op));
        break;
      case OpKind::kRemoteLoad:
      case OpKind::kRemoteStore:
        op.remote_bytes = bytes(the_tensor(op));
        break;
      // Collectives, as the engine's backends run them: direct exchanges within a group of
      // G members (engine/runtime/collectives.h). Each byte a member sends is a byte
      // another receives, so a group moves twice what it sends; members move different
      // bytes when a tensor does not split evenly, and the plan, one for every replica,
      // holds the mean over the G members, rounded down. The mean does not depend on
      // where the chunks are cut.
      case OpKind::kAllGather: {
        // Every member's shard, truncated to the full tensor, goes to the G-1 others: the
        // group sends (G-1) full tensors.
        const std::uint64_t g = u(op.grouping.group_size);
        op.collective_bytes = 2 * (g - 1) * bytes(op.outputs[shard_operand::kDst]) / g;
        break;
      }
      case OpKind::kReduceScatter: {
        // The member holding shard k receives slice k (the part inside the tensor) from the
        // G-1 others of its group in `grouping`; a group of G holds G / S copies of each of
        // the S slices, so it sends (G-1) (G / S) times the scattered bytes.
        const std::uint64_t g = u(op.grouping.group_size);
        const std::uint64_t s = u(op.shard_grouping.group_size);
        const std::uint64_t scattered = std::min(bytes(op.inputs[shard_operand::kSrc]),
                                                 s * bytes(op.outputs[shard_operand::kDst]));
        op.collective_bytes = 2 * (g - 1) * scattered / s;
        break;
      }
      case OpKind::kAllReduce: {
        // The owner of each chunk receives it from the G-1 others and sends the sum back to
        // them: the group sends 2 (G-1) tensors.
        const std::uint64_t g = u(op.grouping.group_size);
        op.collective_bytes = 4 * (g - 1) * bytes(the_tensor(op)) / g;
        break;
      }
      case OpKind::kForward: {
        // Every kind's first input is the layer's input (layer_kinds.h).
        const LayerInfo& l = layer(op.layer);
        op.flops = layer_kind(l.kind).forward_flops(l, rows(op.inputs[0]));
        break;
      }
      case OpKind::kLoss: {
        // softmax (exp, sum, divide), log, and the gradient: about 5 per logit.
        op.flops = 5 * u(nelms(op.inputs[loss_operand::kLogits]));
        break;
      }
      case OpKind::kBackward: {
        // Every kind's first input is the layer's input or the output's gradient, both
        // a micro-batch of rows, and its first output the input's gradient.
        const LayerInfo& l = layer(op.layer);
        op.flops = layer_kind(l.kind).backward_flops(l, rows(op.inputs[0]), op.outputs[0] >= 0);
        break;
      }
      case OpKind::kOptimizerStep:
        op.flops = optimizer_flops_per_element(plan_.optimizer) *
                   u(nelms(op.state[optimizer_operand::kWeight]));
        break;
      case OpKind::kRepeat:
        for (Op& inner : op.body) {
          annotate(inner);
          op.flops += inner.flops * u(op.steps);
          op.host_bytes += inner.host_bytes * u(op.steps);
          op.remote_bytes += inner.remote_bytes * u(op.steps);
          op.collective_bytes += inner.collective_bytes * u(op.steps);
        }
        break;
      default:
        break;
    }
  }

 private:
  std::uint64_t bytes(int t) const { return plan_.tensors[static_cast<std::size_t>(t)].nbytes; }
  std::int64_t nelms(int t) const { return plan_.tensors[static_cast<std::size_t>(t)].nelms; }
  std::uint64_t rows(int t) const {
    const auto& shape = plan_.tensors[static_cast<std::size_t>(t)].shape;
    return shape.empty() ? 1 : u(shape[0]);
  }
  const LayerInfo& layer(int k) const { return plan_.layers[static_cast<std::size_t>(k)]; }

  Plan& plan_;
};

struct Seconds {
  double compute = 0.0;
  double io = 0.0;  // host and remote streams
  double collective = 0.0;
  [[nodiscard]] double total() const { return compute + io + collective; }
};

class Timer {
 public:
  Timer(const DeviceProfile& p, double compute_fraction) : p_(p), fraction_(compute_fraction) {}

  Seconds time(const Op& op) const {
    Seconds s;
    if (op.kind == OpKind::kRepeat) {
      Seconds step;
      for (const Op& inner : op.body) {
        const Seconds t = time(inner);
        step.compute += t.compute;
        step.io += t.io;
        step.collective += t.collective;
      }
      const double n = static_cast<double>(op.steps);
      if (op.io_mode == IoMode::kIoOverlapped) {
        const double c = step.compute + step.collective;
        s.compute = n * std::max(c, step.io) + std::min(c, step.io);
      } else {
        s.compute = n * step.compute;
        s.io = n * step.io;
        s.collective = n * step.collective;
      }
      return s;
    }
    const double flops = static_cast<double>(op.flops);
    if (flops > 0) s.compute = flops / (p_.flops_per_second * fraction_);
    if (op.host_bytes > 0)
      s.io +=
          p_.host_latency_seconds + static_cast<double>(op.host_bytes) / p_.host_bytes_per_second;
    if (op.remote_bytes > 0)
      s.io += p_.streaming_latency_seconds +
              static_cast<double>(op.remote_bytes) / p_.streaming_bytes_per_second;
    if (op.kind == OpKind::kAllGather || op.kind == OpKind::kReduceScatter ||
        op.kind == OpKind::kAllReduce) {
      if (op.collective_bytes > 0)
        s.collective = p_.link_latency_seconds +
                       static_cast<double>(op.collective_bytes) / 2.0 / p_.link_bytes_per_second;
    }
    return s;
  }

 private:
  const DeviceProfile& p_;
  double fraction_;
};

}  // namespace

void annotate_costs(Plan& plan) {
  Costs costs(plan);
  for (Op& op : plan.setup) costs.annotate(op);
  for (Phase& ph : plan.phases)
    for (Op& op : ph.ops) costs.annotate(op);
}

void estimate_time(Plan& plan, const DeviceProfile& profile) {
  const std::int64_t io_tiles = plan.io_tiles;
  // IO tiles stream data; the rest compute (PopXL io_tiles).
  double fraction = 1.0;
  if (plan.io_mode != IoMode::kCompute && io_tiles > 0 && io_tiles < profile.tiles)
    fraction = static_cast<double>(profile.tiles - io_tiles) / static_cast<double>(profile.tiles);
  const Timer timer(profile, fraction);
  plan.estimated_step_seconds = 0.0;
  for (Phase& ph : plan.phases) {
    ph.estimated_seconds = 0.0;
    for (const Op& op : ph.ops) ph.estimated_seconds += timer.time(op).total();
    plan.estimated_step_seconds += ph.estimated_seconds;
  }
  plan.estimated_samples_per_second =
      plan.estimated_step_seconds > 0
          ? static_cast<double>(plan.global_batch_size) / plan.estimated_step_seconds
          : 0.0;
}

}  // namespace popkit::planner
