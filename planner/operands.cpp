// The operand positions of every op kind (planner/operands.h).
#include "planner/operands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <utility>

#include "config/error.h"
#include "planner/names.h"

namespace popkit::planner {
namespace {

using Names = std::span<const std::string_view>;

constexpr std::array<std::string_view, 1> kTensor{"tensor"};
constexpr std::array<std::string_view, 1> kSrc{"src"};
constexpr std::array<std::string_view, 1> kDst{"dst"};
constexpr std::array<std::string_view, 3> kForwardIn{"in", "weight", "bias"};
constexpr std::array<std::string_view, 2> kForwardOut{"out", "pre"};
constexpr std::array<std::string_view, 2> kLossIn{"logits", "labels"};
constexpr std::array<std::string_view, 2> kLossOut{"loss", "dlogits"};
constexpr std::array<std::string_view, 3> kBackwardIn{"in", "pre", "weight"};
constexpr std::array<std::string_view, 1> kBackwardOut{"dx"};
constexpr std::array<std::string_view, 3> kBackwardState{"dy", "grad_weight", "grad_bias"};
constexpr std::array<std::string_view, 1> kIn{"in"};
constexpr std::array<std::string_view, 1> kOut{"out"};
constexpr std::array<std::string_view, 1> kDy{"dy"};
constexpr std::array<std::string_view, 1> kDx{"dx"};
constexpr std::array<std::string_view, 1> kGrad{"grad"};
constexpr std::array<std::string_view, 3> kAdamState{"weight", "adam_m", "adam_v"};
constexpr std::array<std::string_view, 2> kMomentumState{"weight", "momentum"};
constexpr std::array<std::string_view, 1> kWeightOnly{"weight"};

Names optimizer_state_names(const config::Optimizer& o) {
  switch (o.type) {
    case config::OptimizerType::kAdam:
      return kAdamState;
    case config::OptimizerType::kSgd:
      return o.momentum != 0.0 ? Names(kMomentumState) : Names(kWeightOnly);
  }
  return kWeightOnly;
}

config::LayerType layer_kind(const Op& op, const Plan& plan) {
  return op.layer >= 0 && static_cast<std::size_t>(op.layer) < plan.layers.size()
             ? plan.layers[static_cast<std::size_t>(op.layer)].kind
             : config::LayerType::kLinear;
}

}  // namespace

OpSignature op_signature(const Op& op, const Plan& plan) {
  const bool dropout = layer_kind(op, plan) == config::LayerType::kDropout;
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
      return {kSrc, kDst, {}};
    case OpKind::kForward:
      if (dropout) return {kIn, kOut, {}};
      return {kForwardIn, kForwardOut, {}};
    case OpKind::kLoss:
      return {kLossIn, kLossOut, {}};
    case OpKind::kBackward:
      if (dropout) return {kDy, kDx, {}};
      return {kBackwardIn, kBackwardOut, kBackwardState};
    case OpKind::kOptimizerStep:
      return {kGrad, {}, optimizer_state_names(plan.optimizer)};
    case OpKind::kRepeat:
      return {};
  }
  return {};
}

std::string operand_count_error(const Op& op, const Plan& plan) {
  const OpSignature sig = op_signature(op, plan);
  const std::pair<const std::vector<int>*, std::span<const std::string_view>> lists[] = {
      {&op.inputs, sig.inputs}, {&op.outputs, sig.outputs}, {&op.state, sig.state}};
  const char* const names[] = {"inputs", "outputs", "state operands"};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& [got, want] = lists[i];
    if (got->size() != want.size())
      return fmt::format("has {} {} but a {} takes {} ({})", got->size(), names[i],
                         op_kind_name(op.kind), want.size(), fmt::join(want, ", "));
  }
  return {};
}

int the_tensor(const Op& op) {
  for (const auto* list : {&op.outputs, &op.inputs, &op.state})
    if (!list->empty()) return (*list)[kTheTensor];
  return -1;
}

}  // namespace popkit::planner
