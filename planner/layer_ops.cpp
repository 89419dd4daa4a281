// Generic questions about a layer, answered from its kind's entry (layer_ops.h).
#include "planner/layer_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "base/error.h"
#include "config/layer_kinds.h"

namespace popkit::planner {
namespace {

std::int64_t elements(const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace

int layer_operand(const Op& op, const LayerKind& kind, OperandRole role, int index) {
  const bool forward = op.kind == OpKind::kForward;
  const std::pair<std::span<const Operand>, const std::vector<int>*> lists[] = {
      {forward ? kind.forward_inputs : kind.backward_inputs, &op.inputs},
      {forward ? kind.forward_outputs : kind.backward_outputs, &op.outputs},
      {forward ? std::span<const Operand>() : kind.backward_state, &op.state}};
  for (const auto& [operands, tensors] : lists)
    for (std::size_t i = 0; i < operands.size() && i < tensors->size(); ++i)
      if (operands[i].role == role && operands[i].index == index) return (*tensors)[i];
  return -1;
}

bool backward_reads_input(const LayerKind& kind) {
  return std::any_of(kind.backward_inputs.begin(), kind.backward_inputs.end(),
                     [](const Operand& o) { return o.role == OperandRole::kIn; });
}

std::vector<std::int64_t> parameter_elements(const LayerInfo& layer) {
  std::vector<std::int64_t> out;
  for (const ParamSpec& p : layer_kind(layer.kind).params) out.push_back(elements(p.shape(layer)));
  return out;
}

std::uint64_t accumulator_elements(const LayerInfo& layer) {
  std::uint64_t n = 0;
  for (const ParamSpec& p : layer_kind(layer.kind).params)
    n += static_cast<std::uint64_t>(elements(p.shape(layer)));
  return n;
}

std::vector<OperandNeed> operand_needs(const Op& op, const LayerInfo& l, std::int64_t rows) {
  const LayerKind& kind = layer_kind(l.kind);
  const bool forward = op.kind == OpKind::kForward;
  const bool dx = layer_operand(op, kind, OperandRole::kDx) >= 0;
  std::vector<OperandNeed> out;
  const std::pair<std::span<const Operand>, const std::vector<int>*> lists[] = {
      {forward ? kind.forward_inputs : kind.backward_inputs, &op.inputs},
      {forward ? kind.forward_outputs : kind.backward_outputs, &op.outputs},
      {forward ? std::span<const Operand>() : kind.backward_state, &op.state}};
  for (const auto& [operands, tensors] : lists)
    for (std::size_t i = 0; i < operands.size() && i < tensors->size(); ++i) {
      const Operand& o = operands[i];
      const int t = (*tensors)[i];
      const auto p = static_cast<std::size_t>(o.index);
      OperandNeed need;
      switch (o.role) {
        case OperandRole::kIn:
          need = {t, {rows, l.in_features}, "the layer input", true};
          break;
        case OperandRole::kOut:
          need = {t, {rows, l.out_features}, "the layer output", true};
          break;
        case OperandRole::kDy:
          need = {t, {rows, l.out_features}, "the output gradient", true};
          break;
        case OperandRole::kDx:
          need = {t, {rows, l.in_features}, "the input gradient", false};
          break;
        case OperandRole::kParam:
          need = {t, kind.params[p].shape(l), fmt::format("the {}", kind.params[p].suffix), true};
          break;
        case OperandRole::kGrad:
          need = {t, kind.params[p].shape(l), fmt::format("the {} gradient", kind.params[p].suffix),
                  true};
          break;
        case OperandRole::kSaved:  // a backward needs what the layer keeps
          need = {t, kind.saved[p].shape(l, rows), std::string(kind.saved[p].what),
                  !forward && kind.saved[p].kept(l)};
          break;
        case OperandRole::kState:  // an optimizer step's (optimizer_kinds.h), never a layer's
          POPKIT_ASSERT(o.role != OperandRole::kState);
          break;
      }
      // What only dx needs comes with dx (the first layer that trains has neither).
      if (o.with_dx) need.required = dx;
      out.push_back(std::move(need));
    }
  return out;
}

namespace {

// A kind's rules run over a plan's layer: the first error, as "key: message".
class FirstError final : public config::RuleChecks {
 public:
  [[nodiscard]] bool ok(const std::string&) const override { return true; }
  void error(const std::string& path, const std::string& message) override {
    if (first.empty()) first = fmt::format("{}: {}", path, message);
  }
  bool at_least(const std::string& path, std::int64_t value, std::int64_t min) override {
    if (value < min) error(path, fmt::format("must be >= {}, got {}", min, value));
    return value >= min;
  }
  void positive(const std::string& path, double value) override {
    if (!(value > 0 && value <= std::numeric_limits<double>::max()))
      error(path, fmt::format("must be a finite number > 0, got {}", value));
  }
  void non_negative(const std::string& path, double value) override {
    if (!(value >= 0 && value <= std::numeric_limits<double>::max()))
      error(path, fmt::format("must be a finite number >= 0, got {}", value));
  }
  std::string first;
};

}  // namespace

std::string layer_error(const LayerInfo& l) {
  const config::LayerKindRules* rules = config::find_layer_kind(l.kind);
  if (rules == nullptr || std::none_of(layer_kinds().begin(), layer_kinds().end(),
                                       [&](const LayerKind& k) { return k.type == l.kind; }))
    return fmt::format("layer {}: no layer kind '{}'", l.name, l.kind);
  // Every key of the kind, a value of its type (a loaded or built layer holds them all).
  for (const config::KindKey& key : rules->keys) {
    const config::AttributeValue* v = l.attributes.find(key.name);
    if (v == nullptr || !key.accepts(*v))
      return fmt::format("layer {}: a {} layer needs {}, {}", l.name, l.kind, key.name,
                         v == nullptr ? "missing" : "got " + config::attribute_text(*v));
  }
  const std::string path = fmt::format("layer {}", l.name);
  FirstError checks;
  config::Layer layer{l.name, l.kind, l.attributes};
  // Its input's positions, as far as its rules read them (plan.h's LayerInfo::sequence).
  const config::SampleShape in{l.in_features, l.sequence};
  if (!rules->check(layer, in, path, checks) || !checks.first.empty())
    return checks.first.empty() ? fmt::format("layer {}: its keys give no width", l.name)
                                : checks.first;
  const config::SampleShape out = rules->out_shape(l.attributes, in);
  if (out.width != l.out_features || out.positions != l.sequence)
    return fmt::format(
        "layer {}: {} -> {} features in {} positions, but a {} layer of {} inputs has {} "
        "outputs in {}",
        l.name, l.in_features, l.out_features, l.sequence, l.kind, l.in_features, out.width,
        out.positions);
  return {};
}

}  // namespace popkit::planner
