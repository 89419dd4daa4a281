// A phase's program (build_parts.h: PhaseProgram): its parameters loaded and gathered
// before the loop, the repeat loop of its layers' ops (values from earlier phases loaded
// from batch-serial buffers, values for later ones stored), then the gradients reduced
// and the optimizer. The values between phases go through the buffers place_boundaries
// gives them.
#include <fmt/format.h>

#include <map>
#include <set>
#include <unordered_set>

#include "base/error.h"
#include "planner/build_parts.h"
#include "planner/operands.h"

namespace popkit::planner::build {
namespace {

std::int64_t saved_key(int k, int index) {
  return (static_cast<std::int64_t>(k) << 16) + index;
}

// One batch-serial buffer per element shape, rows x steps entries: named `name` when all
// rows have one shape, else "<name>.<elements per sample>"; a row per value, in order.
void assign_rows(BuildState& b, const std::string& name,
                 const std::vector<std::pair<Shape, Slot*>>& values) {
  std::map<Shape, int> buffer_of_shape;
  for (const auto& [shape, slot] : values) buffer_of_shape.emplace(shape, -1);
  for (auto& [shape, buffer] : buffer_of_shape) {
    RemoteBuffer rb;
    std::int64_t n = 1;
    for (const std::int64_t d : shape) n *= d;
    rb.name = buffer_of_shape.size() == 1 ? name : fmt::format("{}.{}", name, n / b.mb);
    rb.cls = TensorClass::kActivations;
    rb.dtype = DType::kFloat32;
    rb.element_shape = shape;
    rb.rows = 0;
    rb.steps = b.steps;
    rb.entry_bytes = static_cast<std::uint64_t>(n) * 4;
    buffer = static_cast<int>(b.p.buffers.size());
    b.p.buffers.push_back(rb);
  }
  for (const auto& [shape, slot] : values) {
    const int buffer = buffer_of_shape[shape];
    *slot = {buffer, b.p.buffers[static_cast<std::size_t>(buffer)].rows++};
  }
}

}  // namespace

Boundaries place_boundaries(BuildState& b, const Schedule& schedule) {
  const auto n = static_cast<std::size_t>(b.n);
  Boundaries at;
  at.fwd_phase.assign(n, -1);
  at.bwd_phase.assign(n, -1);
  for (std::size_t p = 0; p < schedule.phases.size(); ++p)
    for (const Item& it : schedule.phases[p])
      (it.backward ? at.bwd_phase : at.fwd_phase)[static_cast<std::size_t>(it.layer)] =
          static_cast<int>(p);
  const auto fwd = [&](int k) { return at.fwd_phase[static_cast<std::size_t>(k)]; };
  const auto bwd = [&](int k) { return at.bwd_phase[static_cast<std::size_t>(k)]; };
  at.x.assign(n, {});
  at.dx.assign(n, {});
  at.saved.assign(n, {});
  // Which values cross a phase boundary: x_{j+1} = layer j's output, its gradient, and a
  // layer's saved tensors.
  std::vector<std::pair<Shape, Slot*>> xs, dxs;
  std::vector<std::string> saved_names;  // in order of first appearance
  std::map<std::string, std::vector<std::pair<Shape, Slot*>>> saved;
  for (int j = 0; j + 1 < b.n; ++j) {
    const Shape width{b.mb, b.layer(j).out_features};
    if (fwd(j + 1) != fwd(j) || (!b.eval && bwd(j + 1) != fwd(j)))
      xs.emplace_back(width, &at.x[static_cast<std::size_t>(j)]);
    if (!b.eval && bwd(j + 1) != bwd(j) && b.needs_dx(j + 1))
      dxs.emplace_back(width, &at.dx[static_cast<std::size_t>(j)]);
  }
  for (int k = 0; k < b.n; ++k) {
    const std::span<const SavedSpec> specs = b.kind(k).saved;
    auto& slots = at.saved[static_cast<std::size_t>(k)];
    slots.assign(specs.size(), {});
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (b.eval || !specs[i].kept(b.layer(k)) || bwd(k) == fwd(k)) continue;
      const std::string name(specs[i].name);
      if (!saved.contains(name)) saved_names.push_back(name);
      saved[name].emplace_back(specs[i].shape(b.layer(k), b.mb), &slots[i]);
    }
  }
  assign_rows(b, "x", xs);
  assign_rows(b, "dx", dxs);
  for (const std::string& name : saved_names) assign_rows(b, name, saved[name]);
  return at;
}

int PhaseProgram::repeat_tensor(const std::string& name, TensorClass cls, const Shape& shape) {
  const int t = b_.tensor(name, cls, DType::kFloat32, shape);
  b_.alloc(pre_, t);
  repeat_tensors_.push_back(t);
  return t;
}

int PhaseProgram::input(int k) {
  int& t = x_.try_emplace(k, -1).first->second;
  if (t >= 0) return t;
  if (k == 0) {
    // The first layer's input: the images, streamed from the host (again in the first
    // layer's backward phase rather than kept in a buffer).
    t = repeat_tensor("images", TensorClass::kIoSlots, {b_.mb, b_.layer(0).in_features});
    b_.host_load(body_, Stream::kImages, t);
    return t;
  }
  t = load(at_.x[static_cast<std::size_t>(k - 1)], b_.prefix(k) + ".in",
           {b_.mb, b_.layer(k).in_features});
  return t;
}

int PhaseProgram::load(const Slot& s, const std::string& name, const Shape& shape) {
  POPKIT_ASSERT(s.buffer >= 0);
  const int t = repeat_tensor(name, TensorClass::kIoSlots, shape);
  b_.remote_load(body_, s.buffer, s.row, -1, t);
  return t;
}

int PhaseProgram::output(int k) {
  const int t = repeat_tensor(b_.prefix(k) + ".out", TensorClass::kActivations,
                              {b_.mb, b_.layer(k).out_features});
  x_[k + 1] = t;
  return t;
}

int PhaseProgram::saved(int k, int index, bool backward) {
  const SavedSpec& spec = b_.kind(k).saved[static_cast<std::size_t>(index)];
  const std::string name = fmt::format("{}.{}", b_.prefix(k), spec.name);
  const Shape shape = spec.shape(b_.layer(k), b_.mb);
  int& t = saved_.try_emplace(saved_key(k, index), -1).first->second;
  if (!backward) {
    t = repeat_tensor(name, TensorClass::kActivations, shape);
    return t;
  }
  if (t >= 0) return t;  // the forward ran in this phase
  t = load(at_.saved[static_cast<std::size_t>(k)][static_cast<std::size_t>(index)], name + ".saved",
           shape);
  return t;
}

int PhaseProgram::output_grad(int k) {
  int& t = dx_.try_emplace(k + 1, -1).first->second;
  if (t >= 0) return t;
  t = load(at_.dx[static_cast<std::size_t>(k)], b_.prefix(k) + ".dy",
           {b_.mb, b_.layer(k).out_features});
  return t;
}

int PhaseProgram::input_grad(int k) {
  const int t = repeat_tensor(b_.prefix(k) + ".dx", TensorClass::kActivations,
                              {b_.mb, b_.layer(k).in_features});
  dx_[k] = t;
  return t;
}

int PhaseProgram::grad(int k, int param) {
  // Each layer accumulates its own gradient, a tied parameter's too (its layer's name):
  // update_all adds it to the owner's before the owner's update, in every mode alike.
  const ParamSpec& spec = b_.kind(k).params[static_cast<std::size_t>(param)];
  const int t = b_.tensor(fmt::format("{}.{}.grad", b_.prefix(k), spec.suffix),
                          TensorClass::kGradAccumulators, DType::kFloat32, spec.shape(b_.layer(k)));
  new_grads_.push_back(t);
  return t;
}

void PhaseProgram::begin(const std::vector<Item>& items) {
  pre_.clear();
  body_.clear();
  post_.clear();
  repeat_tensors_.clear();
  x_.clear();
  dx_.clear();
  saved_.clear();
  grads_.clear();
  forms_.reset();
  b_.begin_scope(items);
}

void PhaseProgram::forward(int k) {
  const std::size_t ks = static_cast<std::size_t>(k);
  const LayerKind& kind = b_.kind(k);
  if (b_.eval && kind.identity_in_eval) {
    // Dropout in evaluation: the identity, no op; its output is its input.
    const int out = input(k);
    x_[k + 1] = out;
    if (at_.x[ks].buffer >= 0) b_.remote_store(body_, at_.x[ks].buffer, at_.x[ks].row, -1, out);
    return;
  }
  Op f = forward_op(b_, k, *this);
  const int out = layer_operand(f, kind, OperandRole::kOut);
  std::vector<int> saved;
  for (std::size_t i = 0; i < kind.saved.size(); ++i)
    saved.push_back(layer_operand(f, kind, OperandRole::kSaved, static_cast<int>(i)));
  body_.push_back(std::move(f));
  if (at_.x[ks].buffer >= 0) b_.remote_store(body_, at_.x[ks].buffer, at_.x[ks].row, -1, out);
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const Slot& s = at_.saved[ks][i];
    if (s.buffer >= 0) b_.remote_store(body_, s.buffer, s.row, -1, saved[i]);
  }
  if (k != b_.n - 1) return;
  if (b_.eval) {
    // The host scores the logits (engine/engine.h, Engine::evaluate).
    b_.host_store(body_, Stream::kLogits, out);
    return;
  }
  LossTensors loss{out, -1, -1, -1};
  loss.labels = repeat_tensor("labels", TensorClass::kIoSlots, b_.labels_shape());
  loss.loss = repeat_tensor("loss", TensorClass::kActivations, {1});
  loss.dlogits = out;  // the loss overwrites the logits with their gradient
  dx_[b_.n] = loss.dlogits;
  add_loss(b_, body_, loss);
}

void PhaseProgram::backward(int k) {
  if (!runs_backward(b_, k)) return;  // nothing before it trains, nothing to train
  new_grads_.clear();
  Op op = backward_op(b_, k, *this);
  // No zero op: the backward of repeat step 0 writes the accumulators whole (acc = g,
  // popxl-addons' running mean at s = 0). engine.measured_memory's poisoning test checks
  // that nothing reads them, or any tensor, before that first write.
  for (const int g : new_grads_) b_.alloc(pre_, g);
  // Each parameter's accumulator, updated after the phase's backwards (update_all).
  std::vector<int> grads;
  for (std::size_t p = 0; p < b_.kind(k).params.size(); ++p)
    grads.push_back(layer_operand(op, b_.kind(k), OperandRole::kGrad, static_cast<int>(p)));
  if (!grads.empty()) grads_.emplace_back(k, grads);
  const int dx = layer_operand(op, b_.kind(k), OperandRole::kDx);
  body_.push_back(std::move(op));
  if (dx < 0) return;
  // dx_k to its buffer when a later phase reads it (k > 0: a layer before k trains).
  const Slot& s = at_.dx[static_cast<std::size_t>(k - 1)];
  if (s.buffer >= 0) b_.remote_store(body_, s.buffer, s.row, -1, dx);
}

void PhaseProgram::build(const std::string& name, const std::vector<Item>& items,
                         bool defer_optimizer) {
  begin(items);
  // Parameters first: loaded once per phase, all-gathered where sharded.
  for (const Item& it : items)
    for (const int param :
         it.backward ? backward_params(b_, it.layer) : forward_params(b_, it.layer))
      forms_.ensure_full(pre_, it.layer, param);
  // Free a loaded shard once gathered when this phase does not update the parameter (a
  // tied parameter's owner updates it).
  std::set<std::pair<int, int>> updated;  // owners (layer, parameter)
  for (const Item& it : items)
    for (std::size_t p = 0; it.backward && p < b_.kind(it.layer).params.size(); ++p)
      if (b_.owns(it.layer, static_cast<int>(p))) updated.emplace(it.layer, static_cast<int>(p));
  for (const Item& it : items)
    for (std::size_t p = 0; p < b_.kind(it.layer).params.size(); ++p)
      if (!updated.contains(b_.owner(it.layer, static_cast<int>(p))))
        forms_.free_gathered_home(pre_, it.layer, static_cast<int>(p));

  for (const Item& it : items) {
    if (it.backward)
      backward(it.layer);
    else
      forward(it.layer);
  }

  double_buffer();
  Op rep = BuildState::op(OpKind::kRepeat, fmt::format("{} steps", b_.steps));
  rep.steps = b_.steps;
  rep.io_mode = b_.p.io_mode;
  BuildState::move_ops(body_, rep.body);
  for (const int t : repeat_tensors_) b_.free(post_, t);
  if (defer_optimizer) {
    for (const Item& it : items) forms_.release_layer(post_, it.layer);
    deferred_grads_ = grads_;
  } else {
    update_all(post_, grads_);
    store_contributions(post_);
    for (const Item& it : items) forms_.release_layer(post_, it.layer);
  }
  Phase ph;
  ph.name = name;
  ph.ops.reserve(pre_.size() + 1 + post_.size());
  BuildState::move_ops(pre_, ph.ops);
  ph.ops.push_back(std::move(rep));
  BuildState::move_ops(post_, ph.ops);
  b_.p.phases.push_back(std::move(ph));
}

void PhaseProgram::optimizer_phase(const std::string& name) {
  std::vector<Item> items;
  for (const auto& [k, g] : deferred_grads_) items.push_back({k, true});
  begin(items);
  std::vector<Op> ops;
  update_all(ops, deferred_grads_);
  store_contributions(ops);
  Phase ph;
  ph.name = name;
  ph.ops = std::move(ops);
  b_.p.phases.push_back(std::move(ph));
}

void PhaseProgram::update_all(std::vector<Op>& ops, const Grads& grads) {
  // Backwards run from the last layer: a tied layer's gradient is made before its owner's.
  for (const auto& [k, g] : grads)
    for (std::size_t p = 0; p < g.size(); ++p) {
      const int param = static_cast<int>(p);
      if (g[p] < 0) continue;
      if (!b_.owns(k, param)) {
        waiting_[b_.owner(k, param)].push_back({g[p], -1});
        continue;
      }
      add_contributions(ops, k, param, g[p]);
      forms_.update(ops, k, param, g[p]);
    }
}

void PhaseProgram::add_contributions(std::vector<Op>& ops, int k, int param, int grad) {
  const auto found = waiting_.find({k, param});
  if (found == waiting_.end()) return;
  for (const Contribution& c : found->second) {
    if (c.buffer >= 0) {
      b_.alloc(ops, c.tensor);
      b_.remote_load(ops, c.buffer, -1, 0, c.tensor);
    }
    b_.add(ops, grad, c.tensor);
    b_.free(ops, c.tensor);
  }
  waiting_.erase(found);
}

void PhaseProgram::store_contributions(std::vector<Op>& ops) {
  for (auto& [owner, list] : waiting_)
    for (Contribution& c : list) {
      if (c.buffer >= 0) continue;
      const DeviceTensor& d = b_.p.tensors[static_cast<std::size_t>(c.tensor)];
      RemoteBuffer rb;
      rb.name = d.name;
      rb.cls = TensorClass::kGradAccumulators;
      rb.dtype = d.dtype;
      rb.element_shape = d.shape;
      rb.entry_bytes = d.nbytes;
      c.buffer = static_cast<int>(b_.p.buffers.size());
      b_.p.buffers.push_back(std::move(rb));
      b_.remote_store(ops, c.buffer, -1, 0, c.tensor);
      b_.free(ops, c.tensor);
    }
}

void PhaseProgram::double_buffer() {
  if (b_.p.io_mode != IoMode::kIoOverlapped) return;
  std::unordered_set<int> streamed;  // tensors; sized by the loop, not the plan
  for (const Op& o : body_)
    if (o.kind == OpKind::kHostLoad || o.kind == OpKind::kHostStore ||
        o.kind == OpKind::kRemoteLoad || o.kind == OpKind::kRemoteStore)
      streamed.insert(the_tensor(o));
  const std::vector<int> loop_tensors = repeat_tensors_;
  for (const int t : loop_tensors) {
    DeviceTensor& d = b_.p.tensors[static_cast<std::size_t>(t)];
    const bool is_streamed = streamed.count(t) != 0;
    if (!is_streamed && d.double_buffer < 0) continue;
    if (d.double_buffer < 0) {
      const int slot = b_.tensor(d.name + ".slot1", d.cls, d.dtype, d.shape);
      b_.p.tensors[static_cast<std::size_t>(t)].double_buffer = slot;
    }
    const int slot = b_.p.tensors[static_cast<std::size_t>(t)].double_buffer;
    b_.alloc(pre_, slot);
    repeat_tensors_.push_back(slot);
  }
}

}  // namespace popkit::planner::build
