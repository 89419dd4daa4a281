// Pipelined plans (build_parts.h: place_stages, build_stages; docs/pipelining.md): each
// stage's program for one step on a device of its own, its weights gathered where
// sharded, its stash and working tensors allocated, the 1F1B slots unrolled (each slot
// the forward or backward of the stage's layers on one micro-batch, between receive and
// send), then, after the flush, the gradients reduced over the same stage of every
// replica and the optimizer. Every tensor is allocated at the start and freed at the
// end: the device's memory through the step is static, as on the IPU. A parameter tied
// across stages (a head on the last stage tied to the token table on the first) is its
// owner stage's variable; the tied layer's stage reads a copy of it (TiedCopy).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "planner/build_parts.h"
#include "planner/pipeline.h"
#include "planner/workspace.h"

namespace popkit::planner::build {
namespace {

std::int64_t n_stages(const BuildState& b) {
  return static_cast<std::int64_t>(b.p.pipeline->stages.size());
}

// A parameter tied to a layer on another stage, as Graphcore's pipelined GPT ties its
// head on the last stage to the embedding on the first: one variable, with its optimizer
// state, on the owner's stage. At the step's start the owner's stage sends the weight
// (gathered where sharded) into `copy` on the tied layer's stage, which its forward and
// backward read; after the flush that stage sends the gradient it accumulated into
// `grad` on the owner's stage, which adds it to the owner's before the update, as
// build_phase.cpp's update_all does in one program: the same sum in the same order.
struct TiedCopy {
  int layer = -1, param = -1;  // the tied layer's parameter
  int owner_stage = -1, stage = -1;
  int copy = -1;  // the weight's copy on `stage`
  int grad = -1;  // training: the gradient's receive buffer on `owner_stage`
};

// Each stage's receive buffers, always live on its device (a send from a neighbour may
// come at any moment of the step): the activation from the stage before, and, when
// training, the gradient from the stage after (when that stage computes one); and the
// tied parameters' copies and gradients.
struct ReceiveBuffers {
  std::vector<int> activation, gradient;  // per stage, -1: none
  std::vector<TiedCopy> tied;             // by tied layer, then parameter
};

// The parameters tied to a layer on another stage, their copies and receive buffers.
void add_tied_copies(BuildState& b, ReceiveBuffers& r) {
  for (int k = 0; k < b.n; ++k)
    for (std::size_t param = 0; param < b.kind(k).params.size(); ++param) {
      const auto [owner, owner_param] = b.owner(k, static_cast<int>(param));
      const int owner_stage = b.stage_of_layer[static_cast<std::size_t>(owner)];
      const int stage = b.stage_of_layer[static_cast<std::size_t>(k)];
      if (owner_stage == stage) continue;  // the owner's own tensors serve both
      TiedCopy t{k, static_cast<int>(param), owner_stage, stage};
      const Variable& v = b.var(b.param_vars(k, t.param).value);
      b.stage = stage;
      t.copy = b.tensor(v.name + ".copy", TensorClass::kWeights, v.dtype, v.meta_shape,
                        /*always_live=*/true);
      b.alloc(b.p.setup, t.copy);
      if (!b.eval) {
        const ParamSpec& spec = b.kind(k).params[param];
        b.stage = owner_stage;
        t.grad = b.tensor(fmt::format("recv.{}.{}.grad", b.layer(k).name, spec.suffix),
                          TensorClass::kGradAccumulators, DType::kFloat32, v.meta_shape,
                          /*always_live=*/true);
        b.alloc(b.p.setup, t.grad);
      }
      r.tied.push_back(t);
    }
  b.stage = -1;
}

ReceiveBuffers add_receive_buffers(BuildState& b) {
  const std::int64_t S = n_stages(b);
  ReceiveBuffers r;
  r.activation.assign(static_cast<std::size_t>(S), -1);
  r.gradient.assign(static_cast<std::size_t>(S), -1);
  for (std::int64_t s = 0; s < S; ++s) {
    const PipelineStagePlan& st = b.p.pipeline->stages[static_cast<std::size_t>(s)];
    b.stage = static_cast<int>(s);
    if (s > 0) {
      const int t = b.tensor("recv.activation", TensorClass::kIoSlots, DType::kFloat32,
                             {b.mb, b.layer(st.first_layer).in_features}, /*always_live=*/true);
      b.alloc(b.p.setup, t);
      r.activation[static_cast<std::size_t>(s)] = t;
    }
    const int next_first = st.first_layer + st.n_layers;
    if (!b.eval && s + 1 < S && b.needs_dx(next_first)) {
      const int t = b.tensor("recv.gradient", TensorClass::kIoSlots, DType::kFloat32,
                             {b.mb, b.layer(next_first - 1).out_features}, /*always_live=*/true);
      b.alloc(b.p.setup, t);
      r.gradient[static_cast<std::size_t>(s)] = t;
    }
  }
  b.stage = -1;
  add_tied_copies(b, r);
  return r;
}

// One stage's program: its tensors for the step, then its slots.
class StageProgram final : public OperandSource {
 public:
  StageProgram(BuildState& b, const ReceiveBuffers& recv, int s)
      : b_(b), recv_(recv), forms_(b), s_(s) {}

  void build();

  int input(int k) override { return pick(in_of_[index(k)]); }
  int output(int k) override { return k + 1 == end_ ? out_ : pick(in_of_[index(k + 1)]); }
  int saved(int k, int i, bool) override {
    return pick(saved_of_[index(k)][static_cast<std::size_t>(i)]);
  }
  int output_grad(int) override { return dy_; }
  int input_grad(int k) override { return dx_of_[index(k)]; }
  int param(int k, int param) override {
    const TiedCopy* t = tied_copy(k, param);
    return t != nullptr ? t->copy : forms_.full(k, param);
  }
  int grad(int k, int param) override { return grads_[index(k)][static_cast<std::size_t>(param)]; }

 private:
  // The tie of layer k's parameter to a layer on another stage (null: none, or both on
  // one stage, where the owner's tensors serve both).
  const TiedCopy* tied_copy(int k, int param) const;
  // The tied weights this stage sends and receives at the step's start.
  void send_tied_weights();
  // After the flush: the tied gradients this stage sends to their owners' stages; then
  // each owned parameter's update, the tied gradients added first.
  void update_all();
  std::size_t index(int k) const { return static_cast<std::size_t>(k - first_); }
  // The tensor of the slot's micro-batch among a stash's copies.
  int pick(const std::vector<int>& ts) const { return ts.size() == 1 ? ts[0] : ts[copy_]; }
  int make(const std::string& name, TensorClass cls, const Shape& shape);
  // One tensor, or one per micro-batch the stash keeps.
  std::vector<int> slots_of(const std::string& name, TensorClass cls, const Shape& shape,
                            bool kept);
  void make_tensors();
  void forward_slot(std::vector<Op>& prog);
  void backward_slot(std::vector<Op>& prog);
  void finish(Phase& ph);

  BuildState& b_;
  const ReceiveBuffers& recv_;
  ParamForms forms_;
  const int s_;
  int first_ = 0, end_ = 0;  // the stage's layers [first_, end_)
  std::size_t depth_ = 1;    // stash depth
  std::size_t copy_ = 0;     // the slot's stash copy
  std::vector<Op> pre_, post_;
  std::vector<int> working_;             // allocated after the weights, freed after the last slot
  std::vector<std::vector<int>> in_of_;  // per layer: its input's copies
  std::vector<std::vector<std::vector<int>>> saved_of_;  // per layer, per saved tensor
  std::vector<int> dx_of_;                               // per layer, -1: none
  std::vector<std::vector<int>> grads_;                  // per layer, per parameter
  int out_ = -1, labels_ = -1, loss_ = -1, dlogits_ = -1, dy_in_ = -1;
  int dy_ = -1;  // the gradient the backward slot's next op reads
};

int StageProgram::make(const std::string& name, TensorClass cls, const Shape& shape) {
  const int t = b_.tensor(name, cls, DType::kFloat32, shape);
  b_.alloc(pre_, t);
  working_.push_back(t);
  return t;
}

std::vector<int> StageProgram::slots_of(const std::string& name, TensorClass cls,
                                        const Shape& shape, bool kept) {
  if (!kept) return {make(name, cls, shape)};
  std::vector<int> ts;
  for (std::size_t j = 0; j < depth_; ++j)
    ts.push_back(make(fmt::format("{}[{}]", name, j), cls, shape));
  return ts;
}

// The stash: what a backward needs of its micro-batch's forward (the input, when the
// kind's backward reads it, and the saved tensors), kept for the micro-batches between
// (1F1B: at most min(S - s, GA) of them). Evaluation: a layer after an identity (dropout)
// reads the identity's input.
void StageProgram::make_tensors() {
  const bool train = !b_.eval;
  for (int k = first_; k < end_; ++k) {
    const LayerInfo& l = b_.layer(k);
    const LayerKind& kind = b_.kind(k);
    const bool kept = train && backward_reads_input(kind);
    const std::string name = k == 0 ? "images" : b_.prefix(k) + ".in";
    if (b_.eval && k > first_ && b_.kind(k - 1).identity_in_eval)
      in_of_.push_back(in_of_.back());
    else
      in_of_.push_back(slots_of(name,
                                k == first_ ? TensorClass::kIoSlots : TensorClass::kActivations,
                                {b_.mb, l.in_features}, kept));
    std::vector<std::vector<int>> saved;
    for (const SavedSpec& spec : kind.saved)
      saved.push_back(train && spec.kept(l)
                          ? slots_of(fmt::format("{}.{}", b_.prefix(k), spec.name),
                                     TensorClass::kActivations, spec.shape(l, b_.mb), true)
                          : std::vector<int>{});
    saved_of_.push_back(std::move(saved));
  }
  const LayerInfo& last = b_.layer(end_ - 1);
  const bool last_is_identity = b_.eval && b_.kind(end_ - 1).identity_in_eval;
  out_ = last_is_identity ? -1
                          : make(b_.prefix(end_ - 1) + ".out", TensorClass::kActivations,
                                 {b_.mb, last.out_features});
  if (s_ == n_stages(b_) - 1 && train) {
    labels_ = make("labels", TensorClass::kIoSlots, b_.labels_shape());
    loss_ = make("loss", TensorClass::kActivations, {1});
    dlogits_ = out_;  // the loss overwrites the logits with their gradient
  }
  // The backward's working tensors: the gradient received, and each layer's dx (the dy
  // of the layer before it, overwritten in place with dz).
  const int recv_grad = recv_.gradient[static_cast<std::size_t>(s_)];
  dy_in_ = recv_grad >= 0 ? make(b_.prefix(end_ - 1) + ".dy", TensorClass::kIoSlots,
                                 {b_.mb, last.out_features})
                          : dlogits_;
  for (int k = first_; k < end_; ++k)
    dx_of_.push_back(train && b_.needs_dx(k) ? make(b_.prefix(k) + ".dx", TensorClass::kActivations,
                                                    {b_.mb, b_.layer(k).in_features})
                                             : -1);
  for (int k = first_; k < end_; ++k) {
    std::vector<int> grads;
    if (train)
      for (const ParamSpec& spec : b_.kind(k).params)
        grads.push_back(b_.tensor(fmt::format("{}.{}.grad", b_.prefix(k), spec.suffix),
                                  TensorClass::kGradAccumulators, DType::kFloat32,
                                  spec.shape(b_.layer(k))));
    for (const int g : grads) b_.alloc(pre_, g);
    grads_.push_back(std::move(grads));
  }
}

void StageProgram::forward_slot(std::vector<Op>& prog) {
  const std::int64_t S = n_stages(b_);
  const int x = input(first_);
  if (s_ == 0)
    b_.host_load(prog, Stream::kImages, x);
  else
    b_.transfer(prog, OpKind::kRecv, recv_.activation[static_cast<std::size_t>(s_)], x, s_ - 1);
  int y = x;
  for (int k = first_; k < end_; ++k) {
    if (b_.eval && b_.kind(k).identity_in_eval) continue;  // the identity: no op
    Op f = forward_op(b_, k, *this);
    y = layer_operand(f, b_.kind(k), OperandRole::kOut);
    prog.push_back(std::move(f));
  }
  if (s_ + 1 < S)
    b_.transfer(prog, OpKind::kSend, y, recv_.activation[static_cast<std::size_t>(s_ + 1)], s_ + 1);
  else if (b_.eval)
    b_.host_store(prog, Stream::kLogits, y);
  else
    add_loss(b_, prog, {y, labels_, loss_, dlogits_});
}

void StageProgram::backward_slot(std::vector<Op>& prog) {
  const int recv_grad = recv_.gradient[static_cast<std::size_t>(s_)];
  dy_ = dy_in_;
  if (recv_grad >= 0) b_.transfer(prog, OpKind::kRecv, recv_grad, dy_in_, s_ + 1);
  for (int k = end_ - 1; k >= first_ && dy_ >= 0 && runs_backward(b_, k); --k) {
    prog.push_back(backward_op(b_, k, *this));
    dy_ = dx_of_[index(k)];
  }
  if (s_ > 0 && dx_of_[0] >= 0)
    b_.transfer(prog, OpKind::kSend, dx_of_[0], recv_.gradient[static_cast<std::size_t>(s_ - 1)],
                s_ - 1);
}

void StageProgram::build() {
  const std::int64_t S = n_stages(b_);
  PipelineStagePlan& st = b_.p.pipeline->stages[static_cast<std::size_t>(s_)];
  first_ = st.first_layer;
  end_ = first_ + st.n_layers;
  b_.stage = s_;
  std::vector<Item> items;
  for (int k = first_; k < end_; ++k) items.push_back({k, false});
  if (!b_.eval)
    for (int k = end_ - 1; k >= first_; --k) items.push_back({k, true});
  b_.begin_scope(items);
  for (int k = first_; k < end_; ++k)
    for (std::size_t param = 0; param < b_.kind(k).params.size(); ++param)
      if (tied_copy(k, static_cast<int>(param)) == nullptr)
        forms_.ensure_full(pre_, k, static_cast<int>(param));
  send_tied_weights();
  st.stash_depth = b_.eval ? 1 : std::min<std::int64_t>(S - s_, b_.steps);
  depth_ = static_cast<std::size_t>(st.stash_depth);
  make_tensors();

  Phase ph;
  std::vector<std::string> names;
  for (int k = first_; k < end_; ++k) names.push_back(b_.layer(k).name);
  ph.name = fmt::format("stage {}: {}", s_, fmt::join(names, " "));
  ph.stage = s_;
  std::vector<Op>& prog = ph.ops;
  BuildState::move_ops(pre_, prog);
  std::vector<PipelineSlot> order;
  if (b_.eval) {
    for (std::int64_t i = 0; i < b_.steps; ++i) order.push_back({PipelineWork::kForward, i, 0, 0});
  } else {
    order = one_f_one_b_order(s_, S, b_.steps);
  }
  for (const PipelineSlot& slot : order) {
    copy_ = static_cast<std::size_t>(slot.micro_batch) % depth_;
    StageSlot ss{slot.work, slot.micro_batch, static_cast<std::int64_t>(prog.size()), 0};
    if (slot.work == PipelineWork::kForward)
      forward_slot(prog);
    else
      backward_slot(prog);
    ss.end_op = static_cast<std::int64_t>(prog.size());
    ph.slots.push_back(ss);
  }
  finish(ph);
}

const TiedCopy* StageProgram::tied_copy(int k, int param) const {
  for (const TiedCopy& t : recv_.tied)
    if (t.layer == k && t.param == param) return &t;
  return nullptr;
}

void StageProgram::send_tied_weights() {
  for (const TiedCopy& t : recv_.tied) {
    if (t.owner_stage == s_) {
      const auto [owner, owner_param] = b_.owner(t.layer, t.param);
      b_.transfer(pre_, OpKind::kSend, forms_.full(owner, owner_param), t.copy, t.stage);
    } else if (t.stage == s_) {
      b_.transfer(pre_, OpKind::kRecv, t.copy, t.copy, t.owner_stage);  // read in place
    }
  }
}

// The tied gradients leave first, so that their owners' stages wait the least. An
// owner adds its tied layers' gradients from the last layer back, the order in which
// build_phase.cpp's update_all meets their backwards.
void StageProgram::update_all() {
  for (const TiedCopy& t : recv_.tied)
    if (t.stage == s_) {
      const int g = grads_[index(t.layer)][static_cast<std::size_t>(t.param)];
      b_.transfer(post_, OpKind::kSend, g, t.grad, t.owner_stage);
      b_.free(post_, g);
    }
  for (int k = first_; k < end_; ++k) {
    const std::vector<int>& g = grads_[index(k)];
    for (std::size_t param = 0; param < g.size(); ++param) {
      if (!b_.owns(k, static_cast<int>(param))) continue;  // added to its owner's below
      const std::pair<int, int> owner{k, static_cast<int>(param)};
      for (int j = b_.n - 1; j > k; --j)
        for (std::size_t q = 0; q < b_.kind(j).params.size(); ++q) {
          if (b_.owner(j, static_cast<int>(q)) != owner) continue;
          const TiedCopy* t = tied_copy(j, static_cast<int>(q));
          int addend = -1;
          if (t != nullptr) {
            addend = t->grad;
            b_.transfer(post_, OpKind::kRecv, addend, addend, t->stage);  // read in place
          } else {
            addend = grads_[index(j)][q];
          }
          b_.add(post_, g[param], addend);
          if (t == nullptr) b_.free(post_, addend);
        }
      forms_.update(post_, k, static_cast<int>(param), g[param]);
    }
  }
}

// The flush is behind us: every backward of the step has run on this stage. Then one
// kWorkspace tensor, as large as its largest op needs, live through the program (the
// slots' ops follow each other closely; one region serves them all).
void StageProgram::finish(Phase& ph) {
  for (const int t : working_) b_.free(post_, t);
  if (b_.eval)
    for (int k = first_; k < end_; ++k) forms_.release_layer(post_, k);
  else
    update_all();
  BuildState::move_ops(post_, ph.ops);
  std::uint64_t bytes = 0;
  for (const Op& o : ph.ops) bytes = std::max(bytes, op_workspace_bytes(o, b_.p));
  if (bytes > 0) {
    const int t = b_.tensor(fmt::format("stage{}.workspace", ph.stage), TensorClass::kWorkspace,
                            DType::kFloat32, {static_cast<std::int64_t>(bytes / 4)});
    for (Op& o : ph.ops)
      if (op_workspace_bytes(o, b_.p) > 0) o.workspace = t;
    std::vector<Op> head;
    b_.alloc(head, t);
    ph.ops.insert(ph.ops.begin(), std::move(head.front()));
    for (StageSlot& slot : ph.slots) ++slot.first_op, ++slot.end_op;
    b_.free(ph.ops, t);
  }
  b_.p.phases.push_back(std::move(ph));
}

}  // namespace

// The layers' stages: the explicit placement, or the contiguous split that balances each
// layer's forward + backward FLOPs on a micro-batch (balance_stages). FLOPs, not memory:
// the costliest stage sets every slot's length and so the bubble; the memory per stage
// is printed beside it. The split is the training plan's, in evaluation too, so the
// weights live on the same stages.
void place_stages(BuildState& b) {
  const auto& pl = b.c.pipeline;
  std::vector<std::int64_t> first;
  if (pl.placement_auto) {
    std::vector<double> costs;
    const auto rows = static_cast<std::uint64_t>(b.c.training.micro_batch_size);
    for (int k = 0; k < b.n; ++k)
      costs.push_back(
          static_cast<double>(b.kind(k).forward_flops(b.layer(k), rows) +
                              b.kind(k).backward_flops(b.layer(k), rows, b.needs_dx(k))));
    first = balance_stages(costs, pl.stages);
  } else {
    std::int64_t at = 0;
    for (const auto& stage : pl.placement) {
      first.push_back(at);
      at += static_cast<std::int64_t>(stage.size());
    }
  }
  PipelinePlan plan;
  plan.placement_auto = pl.placement_auto;
  b.stage_of_layer.assign(static_cast<std::size_t>(b.n), 0);
  for (std::size_t s = 0; s < first.size(); ++s) {
    PipelineStagePlan st;
    st.first_layer = static_cast<int>(first[s]);
    const std::int64_t end = s + 1 < first.size() ? first[s + 1] : b.n;
    st.n_layers = static_cast<int>(end - first[s]);
    for (std::int64_t k = first[s]; k < end; ++k)
      b.stage_of_layer[static_cast<std::size_t>(k)] = static_cast<int>(s);
    plan.stages.push_back(st);
  }
  b.p.pipeline = std::move(plan);
}

void build_stages(BuildState& b) {
  const ReceiveBuffers recv = add_receive_buffers(b);
  for (std::int64_t s = 0; s < n_stages(b); ++s) StageProgram(b, recv, static_cast<int>(s)).build();
  b.stage = -1;
}

}  // namespace popkit::planner::build
