// A parameter's forms on device within the program being built (build_parts.h:
// ParamForms): its home (loaded from its remote buffer when remote), its full tensor
// (all-gathered when sharded), the update (the gradient reduced over the variables'
// grouping, the optimizer on shards or on the full tensor, the home stored back).
#include <fmt/format.h>

#include "planner/build_parts.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"

namespace popkit::planner::build {

// A tied parameter's forms are its owner's: one variable, one tensor per form.
std::string ParamForms::base(int k, int param) const {
  const auto [ok, op] = b_.owner(k, param);
  return fmt::format("{}.{}", b_.prefix(ok),
                     b_.kind(ok).params[static_cast<std::size_t>(op)].suffix);
}

ParamForms::Forms& ParamForms::forms(int k, int param) {
  // Keyed by the owner's layer and parameter (a kind declares fewer than 2^16).
  const auto [ok, op] = b_.owner(k, param);
  return forms_[(static_cast<std::int64_t>(ok) << 16) + op];
}

int ParamForms::ensure_home(std::vector<Op>& ops, int k, int param) {
  Forms& s = forms(k, param);
  if (s.home >= 0) return s.home;
  const Variable& v = b_.var(b_.param_vars(k, param).value);
  if (!v.remote) {
    s.home = v.device_tensor;
    return s.home;
  }
  const std::string name = base(k, param);
  s.home = b_.tensor(v.sharded ? name + ".shard" : name, TensorClass::kWeights, v.dtype,
                     v.sharded ? Shape{v.shard_size} : v.meta_shape);
  s.home_loaded = true;
  b_.alloc(ops, s.home);
  b_.remote_load(ops, v.buffer, -1, v.entry, s.home);
  return s.home;
}

int ParamForms::ensure_full(std::vector<Op>& ops, int k, int param) {
  Forms& s = forms(k, param);
  if (s.full >= 0) return s.full;
  const Variable& v = b_.var(b_.param_vars(k, param).value);
  const int home = ensure_home(ops, k, param);
  if (!v.sharded) {
    s.full = home;
    return s.full;
  }
  s.full = b_.tensor(base(k, param), TensorClass::kWeights, v.dtype, v.meta_shape);
  s.full_gathered = true;
  b_.alloc(ops, s.full);
  b_.all_gather(ops, home, s.full);
  return s.full;
}

void ParamForms::release(std::vector<Op>& ops, int k, int param) {
  Forms& s = forms(k, param);
  if (s.full_gathered) b_.free(ops, s.full);
  if (s.home_loaded) b_.free(ops, s.home);
  s = {};
}

void ParamForms::release_layer(std::vector<Op>& ops, int k) {
  for (std::size_t param = 0; param < b_.kind(k).params.size(); ++param)
    release(ops, k, static_cast<int>(param));
}

void ParamForms::free_gathered_home(std::vector<Op>& ops, int k, int param) {
  Forms& s = forms(k, param);
  if (s.full_gathered && s.home_loaded) {
    b_.free(ops, s.home);
    s.home_loaded = false;
    s.home = -1;
  }
}

int ParamForms::ensure_state(std::vector<Op>& ops, int var_index, int k, int param) {
  const Variable& v = b_.var(var_index);
  if (!v.remote) return v.device_tensor;
  const std::string_view suffix = std::string_view(v.name).substr(v.name.rfind('.') + 1);
  const int t =
      b_.tensor(fmt::format("{}.{}", base(k, param), suffix), TensorClass::kOptimizerState, v.dtype,
                v.sharded ? Shape{v.shard_size} : v.meta_shape);
  b_.alloc(ops, t);
  b_.remote_load(ops, v.buffer, -1, v.entry, t);
  return t;
}

void ParamForms::done_with_state(std::vector<Op>& ops, int var_index, int t) {
  const Variable& v = b_.var(var_index);
  if (!v.remote) return;
  b_.remote_store(ops, v.buffer, -1, v.entry, t);
  b_.free(ops, t);
}

void ParamForms::optimize(std::vector<Op>& ops, int k, int param, int weight, int grad) {
  const ParamVars& pv = b_.param_vars(k, param);
  Op o = b_.op(OpKind::kOptimizerStep,
               fmt::format("{} {}", b_.c.training.optimizer.type, b_.var(pv.value).name));
  o.layer = b_.var(pv.value).layer;
  o.variable = pv.value;
  o.inputs = {grad};
  // The positions the optimizer's kind declares: the weight, and its state by index.
  for (const Operand& operand : optimizer_step_state(b_.c.training.optimizer))
    o.state.push_back(
        operand.role == OperandRole::kState
            ? ensure_state(ops, pv.state.at(static_cast<std::size_t>(operand.index)), k, param)
            : weight);
  ops.push_back(o);
  b_.free(ops, grad);
  for (std::size_t i = 0; i < pv.state.size(); ++i)
    done_with_state(
        ops, pv.state[i],
        optimizer_operand(o, b_.c.training.optimizer, OperandRole::kState, static_cast<int>(i)));
}

void ParamForms::update(std::vector<Op>& ops, int k, int param, int grad) {
  const ParamVars& pv = b_.param_vars(k, param);
  const Variable& w = b_.var(pv.value);
  const bool ws = w.sharded;
  // Where the optimizer's state is sharded the update runs on shards. An optimizer
  // without state (SGD without momentum) updates where the weight lives.
  const bool ss = pv.state.empty() ? w.sharded : b_.var(pv.state[0]).sharded;
  const std::string name = base(k, param);
  Forms& s = forms(k, param);
  const int home = ensure_home(ops, k, param);
  if (ss) {
    // The state is sharded: the optimizer on shards, the gradient reduce-scattered.
    if (ws && s.full_gathered) {
      b_.free(ops, s.full);  // the full copy is stale after the update
      s.full = -1;
      s.full_gathered = false;
    }
    // The state's shard size: the weight's own is its full size when only the state is sharded.
    const std::int64_t shard_size =
        pv.state.empty() ? w.shard_size : b_.var(pv.state[0]).shard_size;
    const int grad_shard = b_.tensor(name + ".grad.shard", TensorClass::kGradAccumulators,
                                     DType::kFloat32, {shard_size});
    b_.alloc(ops, grad_shard);
    Op rs = b_.op(OpKind::kReduceScatter,
                  fmt::format("{} -> {} (mean)", b_.tname(grad), b_.tname(grad_shard)));
    rs.inputs = {grad};
    rs.outputs = {grad_shard};
    rs.grouping = b_.p.variables_grouping;
    rs.shard_grouping = b_.p.sharding_grouping;
    rs.reduce = ReduceOp::kMean;
    ops.push_back(std::move(rs));
    b_.free(ops, grad);
    int weight_shard = home;
    if (!ws) {
      // Weight full, state sharded: slice this replica's shard, update it, gather back.
      weight_shard = b_.tensor(name + ".shard", TensorClass::kWeights, w.dtype, {shard_size});
      b_.alloc(ops, weight_shard);
      b_.slice_shard(ops, home, weight_shard);
    }
    optimize(ops, k, param, weight_shard, grad_shard);
    if (!ws) {
      b_.all_gather(ops, weight_shard, home);
      b_.free(ops, weight_shard);
    }
  } else {
    // The state is full: all-reduce the gradient, the optimizer on the full weight.
    Op ar = b_.op(OpKind::kAllReduce, fmt::format("{} (mean)", b_.tname(grad)));
    ar.state = {grad};
    ar.grouping = b_.p.variables_grouping;
    ar.reduce = ReduceOp::kMean;
    ops.push_back(std::move(ar));
    const int full = ensure_full(ops, k, param);
    optimize(ops, k, param, full, grad);
    if (ws) {
      // Sharded weight, full state: back to this replica's home shard.
      b_.slice_shard(ops, full, home);
      b_.free(ops, full);
      s.full = -1;
      s.full_gathered = false;
    }
  }
  if (w.remote) b_.remote_store(ops, w.buffer, -1, w.entry, home);
  release(ops, k, param);
}

}  // namespace popkit::planner::build
