// The operand positions of every op kind (planner/operands.h).
#include "planner/operands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <utility>

#include "base/error.h"
#include "planner/layer_kinds.h"
#include "planner/names.h"
#include "planner/optimizer_kinds.h"

namespace popkit::planner {
namespace {

constexpr std::array<Operand, 1> kTensor{{{"tensor"}}};
constexpr std::array<Operand, 1> kSrc{{{"src"}}};
constexpr std::array<Operand, 1> kDst{{{"dst"}}};
constexpr std::array<Operand, 2> kLossIn{{{"logits"}, {"labels"}}};
constexpr std::array<Operand, 2> kLossOut{{{"loss"}, {"dlogits"}}};
constexpr std::array<Operand, 1> kGrad{{{"grad", OperandRole::kGrad}}};
constexpr std::array<Operand, 1> kAddend{{{"addend"}}};
constexpr std::array<Operand, 1> kSum{{{"sum"}}};

std::string_view layer_type(const Op& op, const Plan& plan) {
  return op.layer >= 0 && static_cast<std::size_t>(op.layer) < plan.layers.size()
             ? std::string_view(plan.layers[static_cast<std::size_t>(op.layer)].kind)
             : "linear";
}

}  // namespace

OpSignature op_signature(const Op& op, const Plan& plan) {
  const LayerKind& kind = planner::layer_kind(layer_type(op, plan));
  switch (op.kind) {
    case OpKind::kAlloc:
    case OpKind::kZero:
    case OpKind::kRemoteLoad:
    case OpKind::kHostLoad:
      return {{}, kTensor, {}};
    case OpKind::kFree:
    case OpKind::kRemoteStore:
    case OpKind::kHostStore:
      return {kTensor, {}, {}};
    case OpKind::kAllReduce:
      return {{}, {}, kTensor};
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kSliceShard:
    case OpKind::kSend:
    case OpKind::kRecv:
      return {kSrc, kDst, {}};
    case OpKind::kForward:
      return {kind.forward_inputs, kind.forward_outputs, {}};
    case OpKind::kLoss:
      return {kLossIn, kLossOut, {}};
    case OpKind::kBackward:
      return {kind.backward_inputs, kind.backward_outputs, kind.backward_state};
    case OpKind::kOptimizerStep:
      return {kGrad, {}, optimizer_step_state(plan.optimizer)};
    case OpKind::kAdd:
      return {kAddend, {}, kSum};
    case OpKind::kRepeat:
      return {};
  }
  return {};
}

std::string operand_count_error(const Op& op, const Plan& plan) {
  const OpSignature sig = op_signature(op, plan);
  const std::pair<const std::vector<int>*, std::span<const Operand>> lists[] = {
      {&op.inputs, sig.inputs}, {&op.outputs, sig.outputs}, {&op.state, sig.state}};
  const char* const names[] = {"inputs", "outputs", "state operands"};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& [got, want] = lists[i];
    if (got->size() == want.size()) continue;
    std::vector<std::string_view> positions;
    for (const Operand& o : want) positions.push_back(o.name);
    return fmt::format("has {} {} but a {} takes {} ({})", got->size(), names[i],
                       op_kind_name(op.kind), want.size(), fmt::join(positions, ", "));
  }
  return {};
}

int the_tensor(const Op& op) {
  for (const auto* list : {&op.outputs, &op.inputs, &op.state})
    if (!list->empty()) return (*list)[kTheTensor];
  return -1;
}

}  // namespace popkit::planner
