// A layer's forward and backward ops, made from its kind's declarations (planner/
// layer_kinds.h) for every program: a phase and a pipeline stage differ only in the
// OperandSource that gives the op its tensors (build_parts.h).
#include "config/names.h"
#include "planner/build_parts.h"

namespace popkit::planner::build {
namespace {

using R = OperandRole;

// The order the operands are asked for, role by role: a source that makes tensors as it
// is asked makes them in this order, so the plan's tensors and their allocations come
// out in one order whatever the kind. A forward: its input, the parameters, what it
// saves, its output. A backward: dy, the input, the saved tensors, the parameters, dx,
// the gradients.
constexpr R kForwardOrder[] = {R::kIn, R::kParam, R::kSaved, R::kOut};
constexpr R kBackwardOrder[] = {R::kDy, R::kIn, R::kSaved, R::kParam, R::kDx, R::kGrad};

struct Lists {
  std::span<const Operand> declared[3];
  std::vector<int>* tensors[3];
};

template <typename Get>
void resolve(Lists lists, std::span<const R> order, const Get& get) {
  for (int i = 0; i < 3; ++i) lists.tensors[i]->assign(lists.declared[i].size(), -1);
  for (const R role : order)
    for (int i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < lists.declared[i].size(); ++j)
        if (lists.declared[i][j].role == role) (*lists.tensors[i])[j] = get(lists.declared[i][j]);
}

}  // namespace

Op forward_op(const BuildState& b, int k, OperandSource& source) {
  const LayerKind& kind = b.kind(k);
  const LayerInfo& l = b.layer(k);
  Op f = BuildState::op(OpKind::kForward, l.name);
  f.layer = k;
  std::vector<int> none;
  resolve({{kind.forward_inputs, kind.forward_outputs, {}}, {&f.inputs, &f.outputs, &none}},
          kForwardOrder, [&](const Operand& o) {
            switch (o.role) {
              case R::kIn:
                return source.input(k);
              case R::kParam:
                return source.param(k, o.index);
              case R::kSaved:  // evaluation keeps nothing: nothing runs a backward
                return !b.eval && kind.saved[static_cast<std::size_t>(o.index)].kept(l)
                           ? source.saved(k, o.index, /*backward=*/false)
                           : -1;
              case R::kOut:
                return source.output(k);
              default:
                return -1;
            }
          });
  return f;
}

bool runs_backward(const BuildState& b, int k) {
  return b.has_params(k) || b.needs_dx(k);
}

Op backward_op(const BuildState& b, int k, OperandSource& source) {
  const LayerKind& kind = b.kind(k);
  const LayerInfo& l = b.layer(k);
  const bool dx = b.needs_dx(k);
  Op op = BuildState::op(OpKind::kBackward, l.name);
  op.layer = k;
  resolve({{kind.backward_inputs, kind.backward_outputs, kind.backward_state},
           {&op.inputs, &op.outputs, &op.state}},
          kBackwardOrder, [&](const Operand& o) {
            if (o.with_dx && !dx) return -1;
            switch (o.role) {
              case R::kDy:
                return source.output_grad(k);
              case R::kIn:
                return source.input(k);
              case R::kSaved:
                return kind.saved[static_cast<std::size_t>(o.index)].kept(l)
                           ? source.saved(k, o.index, /*backward=*/true)
                           : -1;
              case R::kParam:
                return source.param(k, o.index);
              case R::kDx:
                return dx ? source.input_grad(k) : -1;
              case R::kGrad:
                return source.grad(k, o.index);
              default:
                return -1;
            }
          });
  return op;
}

std::vector<int> forward_params(const BuildState& b, int k) {
  std::vector<int> out;
  for (const Operand& o : b.kind(k).forward_inputs)
    if (o.role == R::kParam) out.push_back(o.index);
  return out;
}

std::vector<int> backward_params(const BuildState& b, int k) {
  std::vector<int> out;
  const LayerKind& kind = b.kind(k);
  for (const auto list : {kind.backward_inputs, kind.backward_outputs, kind.backward_state})
    for (const Operand& o : list)
      if (o.role == R::kParam && (!o.with_dx || b.needs_dx(k))) out.push_back(o.index);
  return out;
}

void add_loss(BuildState& b, std::vector<Op>& ops, const LossTensors& t) {
  b.host_load(ops, Stream::kLabels, t.labels);
  Op loss = BuildState::op(OpKind::kLoss, std::string(enum_name(b.c.model.loss)));
  loss.inputs = {t.logits, t.labels};
  loss.outputs = {t.loss, t.dlogits};
  ops.push_back(std::move(loss));
  b.host_store(ops, Stream::kLoss, t.loss);
}

}  // namespace popkit::planner::build
