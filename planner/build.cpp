// build_plan: Config -> Plan. Decides groupings, RTS sharding, variable homes and
// remote buffers, then emits each phase's ops (see plan.h for what every op computes),
// and finally runs the memory walk and the cost model over the result.
#include "planner/build.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/error.h"
#include "config/validate.h"
#include "planner/cost.h"
#include "planner/device_profile.h"
#include "planner/host_memory.h"
#include "planner/layer_kinds.h"
#include "planner/layers.h"
#include "planner/memory.h"
#include "planner/names.h"
#include "planner/operands.h"
#include "planner/optimizer_kinds.h"
#include "planner/plan_text.h"
#include "planner/sharding.h"
#include "planner/workspace.h"

namespace popkit::planner {
namespace {

using Shape = std::vector<std::int64_t>;
using config::ExecutionMode;
using config::Pass;

std::int64_t product(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

ReplicaGrouping to_grouping(const config::Config& c, const std::string& name) {
  const auto g = c.grouping(name);
  if (!g) throw Error("replication.groupings: unknown grouping '{}'", name);
  return {c.replication.factor, g->group_size, g->stride};
}

struct Item {
  int layer = 0;
  bool backward = false;
};

constexpr int kWeightParam = 0;
constexpr int kBiasParam = 1;
const char* param_name(int p) {
  return p == kWeightParam ? "weight" : "bias";
}

// The variables of one parameter (weight or bias) of a layer: its value and the
// optimizer's state for it (optimizer_state() says what and in which order).
struct ParamVars {
  int value = -1;
  std::vector<int> state;
};

// The forms a parameter takes on device within the phase being built.
struct ParamState {
  int home = -1;               // what the variable's home holds: the shard, or the full tensor
  bool home_loaded = false;    // loaded from its remote buffer in this phase
  int full = -1;               // the full (meta shape) tensor compute reads
  bool full_gathered = false;  // all-gathered in this phase
};

// A tensor per layer index within one phase, -1 where the phase has none.
class LayerValues {
 public:
  int& at(int k) { return values_.try_emplace(k, -1).first->second; }

 private:
  std::unordered_map<int, int> values_;  // node-based: references stay valid
};

// Where the values passed between phases go: one batch-serial buffer per width and
// kind, one row per layer that needs it.
struct Slot {
  int buffer = -1;
  std::int64_t row = -1;
};

class Builder {
 public:
  Builder(const config::Config& c, Program program) : c_(c), eval_(program == Program::kEval) {}

  Plan build() {
    init_plan();
    add_layers();
    if (c_.pipeline.enabled()) place_stages();
    add_variables();
    if (p_.pipeline) {
      build_stages();
      finish();
      return std::move(p_);
    }
    std::vector<std::vector<Item>> phases;
    std::vector<std::string> names;
    plan_phases(phases, names);
    place_activations(phases);
    if (!eval_ && c_.execution.mode == ExecutionMode::kStandard && c_.remote.optimizer_state) {
      // The off-chip optimizer: training in one phase, then an optimizer phase that
      // loads, updates and stores the optimizer state; gradients stay on device between.
      build_phase(names[0], phases[0], /*defer_optimizer=*/true);
      build_optimizer_phase("optimizer");
    } else {
      for (std::size_t p = 0; p < phases.size(); ++p) build_phase(names[p], phases[p], false);
    }
    if (c_.execution.io_schedule == config::IoSchedule::kPreload &&
        c_.execution.mode == ExecutionMode::kPhased)
      preload_next_phase_loads();
    add_workspace(p_);  // the kernels' scratch, around the ops that need it
    finish();
    return std::move(p_);
  }

 private:
  // ---- plan header, layers, variables ----

  void init_plan() {
    const auto& t = c_.training;
    p_.name = c_.name;
    p_.program = eval_ ? Program::kEval : Program::kTrain;
    p_.replication_factor = c_.replication.factor;
    // Evaluation: eval.micro_batch_size (else training's), and the training repeat count,
    // so a phased evaluation loads each layer's weights once per batch-serial loop.
    mb_ = eval_ && c_.eval.micro_batch_size > 0 ? c_.eval.micro_batch_size : t.micro_batch_size;
    steps_ = t.gradient_accumulation;
    p_.micro_batch_size = mb_;
    p_.gradient_accumulation = steps_;
    p_.global_batch_size = mb_ * steps_ * c_.replication.factor;
    p_.input_shape = c_.model.input_shape;
    p_.mode = c_.execution.mode;
    p_.io_mode = c_.execution.io_mode;
    if (p_.io_mode == IoMode::kIoOverlapped && t.gradient_accumulation < 2) {
      // Overlap needs a next step to load while this one computes.
      p_.io_mode = IoMode::kIo;
      p_.warnings.push_back(fmt::format(
          "execution.io_mode: io_overlapped needs at least 2 steps per repeat loop, but "
          "training.gradient_accumulation is {}; using io",
          t.gradient_accumulation));
    }
    p_.variables_grouping = to_grouping(c_, c_.variables.grouping);
    p_.retrieval_mode = c_.variables.retrieval_mode;
    const std::string& sg =
        c_.sharding.grouping.empty() ? c_.variables.grouping : c_.sharding.grouping;
    p_.sharding_grouping = to_grouping(c_, sg);
    // A sharding group of one replica shards nothing: RTS is off then.
    sharding_on_ = c_.sharding.enabled && p_.sharding_grouping.group_size > 1;
    p_.sharding_threshold = sharding_on_ ? c_.sharding.threshold : 0;
    p_.optimizer = t.optimizer;
    p_.seed = t.seed;
    p_.sync_pattern = config::sync_pattern(c_);
  }

  void add_layers() {
    const auto& layers = c_.model.layers;
    if (layers.empty()) throw Error("model.layers: a model needs at least one layer");
    n_ = static_cast<int>(layers.size());
    p_.layers = model_layers(c_.model);
    // Per graph, its layers in order (model_layers numbers graphs in order of appearance).
    for (int k = 0; k < n_; ++k) {
      const auto g = static_cast<std::size_t>(layer(k).graph);
      if (g == graph_layers_.size()) graph_layers_.emplace_back();
      graph_layers_[g].push_back(k);
    }
    p_.n_classes = p_.layers.back().out_features;
    // Layer k's backward computes its input's gradient only when a layer before it has
    // parameters to train.
    params_before_.assign(static_cast<std::size_t>(n_), false);
    for (int k = 1; k < n_; ++k)
      params_before_[static_cast<std::size_t>(k)] =
          params_before_[static_cast<std::size_t>(k - 1)] || has_params(k - 1);
    // A graph of one layer is named after it; shared graphs are "inner", "inner2", ...
    int n_shared = 0;
    for (const auto& members : graph_layers_) {
      if (members.size() == 1) {
        graph_names_.push_back(p_.layers[static_cast<std::size_t>(members[0])].name);
      } else {
        ++n_shared;
        graph_names_.push_back(n_shared == 1 ? "inner" : fmt::format("inner{}", n_shared));
      }
    }
  }

  const LayerInfo& layer(int k) const { return p_.layers[static_cast<std::size_t>(k)]; }
  const LayerKind& kind(int k) const { return layer_kind(layer(k).kind); }
  // A weight and a bias (linear), or no variables (dropout): layer_kinds.h.
  bool has_params(int k) const { return kind(k).has_params; }
  bool needs_dx(int k) const { return params_before_[static_cast<std::size_t>(k)]; }
  std::int64_t n_shards() const { return p_.sharding_grouping.group_size; }

  void add_variables() {
    params_.assign(static_cast<std::size_t>(n_), {});
    std::unordered_map<std::string, int> buffer_of;
    for (int k = 0; k < n_; ++k) {
      if (!has_params(k)) continue;
      if (p_.pipeline) stage_ = stage_of_layer_[static_cast<std::size_t>(k)];
      const LayerInfo& l = layer(k);
      const std::string& graph = graph_names_[static_cast<std::size_t>(l.graph)];
      const auto rows =
          static_cast<std::int64_t>(graph_layers_[static_cast<std::size_t>(l.graph)].size());
      for (int param = 0; param < 2; ++param) {
        const Shape meta =
            param == kWeightParam ? Shape{l.in_features, l.out_features} : Shape{l.out_features};
        const std::string base = fmt::format("{}.{}", l.name, param_name(param));
        auto add = [&](std::string name, VariableRole role, TensorClass cls, DType dtype,
                       bool class_sharded, bool remote, const std::string& buffer_name) {
          Variable v;
          v.name = std::move(name);
          v.layer = k;
          v.role = role;
          v.cls = cls;
          v.dtype = dtype;
          v.meta_shape = meta;
          v.nelms = product(meta);
          v.sharded = sharding_on_ && class_sharded && v.nelms >= c_.sharding.threshold;
          v.shard_size = v.sharded ? shard_size(v.nelms, n_shards()) : v.nelms;
          v.padding = v.sharded ? shard_padding(v.nelms, n_shards()) : 0;
          v.remote = remote;
          const Shape stored = v.sharded ? Shape{v.shard_size} : meta;
          if (remote) {
            auto [it, added] = buffer_of.emplace(buffer_name, static_cast<int>(p_.buffers.size()));
            if (added) {
              RemoteBuffer b;
              b.name = buffer_name;
              b.cls = cls;
              b.dtype = dtype;
              b.element_shape = stored;
              b.rows = rows;
              b.steps = 1;
              b.entry_bytes = static_cast<std::uint64_t>(product(stored)) *
                              static_cast<std::uint64_t>(dtype_size(dtype));
              p_.buffers.push_back(b);
            }
            v.buffer = it->second;
            v.entry = l.row;
          } else {
            const std::string tname = v.sharded ? v.name + ".shard" : v.name;
            v.device_tensor = tensor(tname, cls, dtype, stored, /*always_live=*/true);
            alloc(p_.setup, v.device_tensor);
          }
          p_.variables.push_back(v);
          return static_cast<int>(p_.variables.size()) - 1;
        };
        const std::string gbase = fmt::format("{}.{}", graph, param_name(param));
        ParamVars& pv = params_[static_cast<std::size_t>(k)][static_cast<std::size_t>(param)];
        pv.value = add(base, param == kWeightParam ? VariableRole::kWeight : VariableRole::kBias,
                       TensorClass::kWeights, DType::kFloat32, c_.sharding.weights,
                       c_.remote.weights, gbase);
        if (eval_) continue;  // evaluation holds no optimizer state
        for (const OptimizerState& st : optimizer_state(c_.training.optimizer)) {
          pv.state.push_back(add(fmt::format("{}.{}", base, st.suffix),
                                 VariableRole::kOptimizerState, TensorClass::kOptimizerState,
                                 st.dtype, c_.sharding.optimizer_state, c_.remote.optimizer_state,
                                 fmt::format("{}.{}", gbase, st.suffix)));
        }
      }
    }
  }

  const Variable& var(int index) const { return p_.variables[static_cast<std::size_t>(index)]; }

  // ---- pipelined execution (docs/pipelining.md) ----

  // The layers' stages: the explicit placement, or the contiguous split that balances
  // each layer's forward + backward FLOPs on a micro-batch (balance_stages). FLOPs, not
  // memory: the costliest stage sets every slot's length and so the bubble; the memory
  // per stage is printed beside it. The split is the training plan's, in evaluation too,
  // so the weights live on the same stages.
  void place_stages() {
    const auto& pl = c_.pipeline;
    std::vector<std::int64_t> first;
    if (pl.placement_auto) {
      std::vector<double> costs;
      const auto rows = static_cast<std::uint64_t>(c_.training.micro_batch_size);
      for (int k = 0; k < n_; ++k)
        costs.push_back(static_cast<double>(kind(k).forward_flops(layer(k), rows) +
                                            kind(k).backward_flops(layer(k), rows, needs_dx(k))));
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
    stage_of_layer_.assign(static_cast<std::size_t>(n_), 0);
    for (std::size_t s = 0; s < first.size(); ++s) {
      PipelineStagePlan st;
      st.first_layer = static_cast<int>(first[s]);
      const std::int64_t end = s + 1 < first.size() ? first[s + 1] : n_;
      st.n_layers = static_cast<int>(end - first[s]);
      for (std::int64_t k = first[s]; k < end; ++k)
        stage_of_layer_[static_cast<std::size_t>(k)] = static_cast<int>(s);
      plan.stages.push_back(st);
    }
    p_.pipeline = std::move(plan);
  }

  std::int64_t n_stages() const { return static_cast<std::int64_t>(p_.pipeline->stages.size()); }

  // Each stage's receive buffers, always live on its device (a send from a neighbour may
  // come at any moment of the step): the activation from the stage before, and, when
  // training, the gradient from the stage after (when that stage computes one).
  void add_receive_buffers() {
    const std::int64_t S = n_stages();
    recv_activation_.assign(static_cast<std::size_t>(S), -1);
    recv_gradient_.assign(static_cast<std::size_t>(S), -1);
    for (std::int64_t s = 0; s < S; ++s) {
      const PipelineStagePlan& st = p_.pipeline->stages[static_cast<std::size_t>(s)];
      stage_ = static_cast<int>(s);
      if (s > 0) {
        const int t = tensor("recv.activation", TensorClass::kIoSlots, DType::kFloat32,
                             {mb_, layer(st.first_layer).in_features}, /*always_live=*/true);
        alloc(p_.setup, t);
        recv_activation_[static_cast<std::size_t>(s)] = t;
      }
      const int next_first = st.first_layer + st.n_layers;
      if (!eval_ && s + 1 < S && needs_dx(next_first)) {
        const int t = tensor("recv.gradient", TensorClass::kIoSlots, DType::kFloat32,
                             {mb_, layer(next_first - 1).out_features}, /*always_live=*/true);
        alloc(p_.setup, t);
        recv_gradient_[static_cast<std::size_t>(s)] = t;
      }
    }
    stage_ = -1;
  }

  void build_stages() {
    add_receive_buffers();
    const std::int64_t S = n_stages();
    for (std::int64_t s = 0; s < S; ++s) build_stage(static_cast<int>(s));
    stage_ = -1;
  }

  void transfer(std::vector<Op>& ops, OpKind kind, int src, int dst, int peer) {
    Op o = op(kind, fmt::format("{} -> {} ({} stage {})", tname(src), tname(dst),
                                kind == OpKind::kSend ? "to" : "from", peer));
    o.inputs = {src};
    o.outputs = {dst};
    o.peer = peer;
    ops.push_back(std::move(o));
  }

  // Stage s's program for one step: its weights gathered where sharded, its stash and
  // working tensors allocated, the 1F1B slots unrolled (each slot the forward or backward
  // of the stage's layers on one micro-batch, between receive and send), then, after the
  // flush, the gradients reduced over the same stage of every replica and the optimizer.
  // Every tensor is allocated at the start and freed at the end: the device's memory
  // through the step is static, as on the IPU.
  void build_stage(int s) {
    const std::int64_t S = n_stages();
    PipelineStagePlan& st = p_.pipeline->stages[static_cast<std::size_t>(s)];
    const int a = st.first_layer;
    const int b = a + st.n_layers;
    stage_ = s;
    std::vector<Item> items;
    for (int k = a; k < b; ++k) items.push_back({k, false});
    if (!eval_)
      for (int k = b - 1; k >= a; --k) items.push_back({k, true});
    begin_phase(items);
    std::vector<Op>& ops = pre_;
    for (int k = a; k < b; ++k) {
      if (!has_params(k)) continue;
      ensure_full(ops, k, kWeightParam);
      ensure_full(ops, k, kBiasParam);
    }
    std::vector<int> working;  // allocated after the weights, freed after the last slot
    auto make = [&](const std::string& name, TensorClass cls, const Shape& shape) {
      const int t = tensor(name, cls, DType::kFloat32, shape);
      alloc(ops, t);
      working.push_back(t);
      return t;
    };
    // The stash: what a backward needs of its micro-batch's forward, kept for the
    // micro-batches between (1F1B: at most min(S - s, GA) of them).
    st.stash_depth = eval_ ? 1 : std::min<std::int64_t>(S - s, steps_);
    const auto depth = static_cast<std::size_t>(st.stash_depth);
    auto slots_of = [&](const std::string& name, TensorClass cls, const Shape& shape, bool kept) {
      std::vector<int> ts;
      if (!kept) {
        ts.push_back(make(name, cls, shape));
        return ts;
      }
      for (std::size_t j = 0; j < depth; ++j)
        ts.push_back(make(fmt::format("{}[{}]", name, j), cls, shape));
      return ts;
    };
    // in_of[k - a]: layer k's input; a linear layer's backward reads it (the weight's
    // gradient), so training keeps it. pre_of: the pre-activation, likewise.
    // Evaluation: a layer after an identity (dropout) reads the identity's input.
    std::vector<std::vector<int>> in_of, pre_of;
    for (int k = a; k < b; ++k) {
      const bool kept = !eval_ && has_params(k);
      const std::string name = k == 0 ? "images" : prefix(k) + ".in";
      if (eval_ && k > a && kind(k - 1).identity_in_eval)
        in_of.push_back(in_of.back());
      else
        in_of.push_back(slots_of(name, k == a ? TensorClass::kIoSlots : TensorClass::kActivations,
                                 {mb_, layer(k).in_features}, kept));
      const bool has_pre = !eval_ && has_params(k) && kind(k).keeps_pre(layer(k));
      pre_of.push_back(has_pre ? slots_of(prefix(k) + ".pre", TensorClass::kActivations,
                                          {mb_, layer(k).out_features}, true)
                               : std::vector<int>{});
    }
    const LayerInfo& last = layer(b - 1);
    const bool last_stage = s == S - 1;
    const bool last_is_identity = eval_ && kind(b - 1).identity_in_eval;
    const int out = last_is_identity ? -1
                                     : make(prefix(b - 1) + ".out", TensorClass::kActivations,
                                            {mb_, last.out_features});
    int labels = -1, loss = -1, dlogits = -1;
    if (last_stage && !eval_) {
      labels = make("labels", TensorClass::kIoSlots, {mb_});
      loss = make("loss", TensorClass::kActivations, {1});
      dlogits = make("dlogits", TensorClass::kActivations, {mb_, last.out_features});
    }
    // The backward's working tensors: the gradient received, and each layer's dx (the
    // dy of the layer before it, overwritten in place with dz).
    const int recv_grad = recv_gradient_[static_cast<std::size_t>(s)];
    const int dy_in = recv_grad >= 0 ? make(prefix(b - 1) + ".dy", TensorClass::kIoSlots,
                                            {mb_, last.out_features})
                                     : dlogits;
    std::vector<int> dx_of(static_cast<std::size_t>(b - a), -1);
    if (!eval_)
      for (int k = a; k < b; ++k)
        if (needs_dx(k))
          dx_of[static_cast<std::size_t>(k - a)] =
              make(prefix(k) + ".dx", TensorClass::kActivations, {mb_, layer(k).in_features});
    std::vector<std::array<int, 2>> grads(static_cast<std::size_t>(b - a), {-1, -1});
    if (!eval_)
      for (int k = a; k < b; ++k) {
        if (!has_params(k)) continue;
        const LayerInfo& l = layer(k);
        auto& g = grads[static_cast<std::size_t>(k - a)];
        g[0] = tensor(prefix(k) + ".weight.grad", TensorClass::kGradAccumulators, DType::kFloat32,
                      {l.in_features, l.out_features});
        g[1] = tensor(prefix(k) + ".bias.grad", TensorClass::kGradAccumulators, DType::kFloat32,
                      {l.out_features});
        alloc(ops, g[0]);
        alloc(ops, g[1]);
      }

    Phase ph;
    ph.name = fmt::format("stage {}: {}", s, stage_layers(a, b));
    ph.stage = s;
    std::vector<Op>& prog = ph.ops;
    move_ops(pre_, prog);
    std::vector<PipelineSlot> order;
    if (eval_) {
      for (std::int64_t i = 0; i < steps_; ++i) order.push_back({PipelineWork::kForward, i, 0, 0});
    } else {
      order = one_f_one_b_order(s, S, steps_);
    }
    for (const PipelineSlot& slot : order) {
      const auto i = static_cast<std::size_t>(slot.micro_batch);
      const std::size_t j = i % depth;
      auto pick = [&](const std::vector<int>& ts) { return ts.size() == 1 ? ts[0] : ts[j]; };
      StageSlot ss{slot.work, slot.micro_batch, static_cast<std::int64_t>(prog.size()), 0};
      if (slot.work == PipelineWork::kForward) {
        int x = pick(in_of[0]);
        if (s == 0)
          host_load(prog, Stream::kImages, x);
        else
          transfer(prog, OpKind::kRecv, recv_activation_[static_cast<std::size_t>(s)], x, s - 1);
        for (int k = a; k < b; ++k) {
          const bool at_end = k + 1 == b;
          if (eval_ && kind(k).identity_in_eval) continue;  // the identity: no op
          const int y = at_end ? out : pick(in_of[static_cast<std::size_t>(k + 1 - a)]);
          Op f = op(OpKind::kForward, layer(k).name);
          f.layer = k;
          if (has_params(k)) {
            const auto& pre = pre_of[static_cast<std::size_t>(k - a)];
            f.inputs = {x, state(k, kWeightParam).full, state(k, kBiasParam).full};
            f.outputs = {y, pre.empty() ? -1 : pick(pre)};
          } else {
            f.inputs = {x};
            f.outputs = {y};
          }
          prog.push_back(std::move(f));
          x = y;
        }
        if (!last_stage) {
          transfer(prog, OpKind::kSend, x, recv_activation_[static_cast<std::size_t>(s + 1)],
                   s + 1);
        } else if (eval_) {
          Op hs = op(OpKind::kHostStore, "logits -> host");
          hs.stream = Stream::kLogits;
          set_tensor(hs, x);
          prog.push_back(std::move(hs));
        } else {
          host_load(prog, Stream::kLabels, labels);
          Op l = op(OpKind::kLoss, std::string(enum_name(c_.model.loss)));
          l.inputs = {x, labels};
          l.outputs = {loss, dlogits};
          prog.push_back(std::move(l));
          Op hs = op(OpKind::kHostStore, "loss -> host");
          hs.stream = Stream::kLoss;
          set_tensor(hs, loss);
          prog.push_back(std::move(hs));
        }
      } else {
        int dy = dy_in;
        if (recv_grad >= 0) transfer(prog, OpKind::kRecv, recv_grad, dy_in, s + 1);
        for (int k = b - 1; k >= a && dy >= 0; --k) {
          const int dx = dx_of[static_cast<std::size_t>(k - a)];
          Op bw = op(OpKind::kBackward, layer(k).name);
          bw.layer = k;
          if (!has_params(k)) {
            if (dx < 0) break;  // nothing before it trains
            bw.inputs = {dy};
            bw.outputs = {dx};
          } else {
            namespace bo = backward_operand;
            const auto& g = grads[static_cast<std::size_t>(k - a)];
            const auto& pre = pre_of[static_cast<std::size_t>(k - a)];
            bw.inputs = {-1, -1, -1};
            bw.outputs = {-1};
            bw.state = {dy, g[0], g[1]};
            bw.inputs[bo::kIn] = pick(in_of[static_cast<std::size_t>(k - a)]);
            if (!pre.empty()) bw.inputs[bo::kPre] = pick(pre);
            if (dx >= 0) {
              bw.inputs[bo::kWeight] = state(k, kWeightParam).full;
              bw.outputs[bo::kDx] = dx;
            }
          }
          prog.push_back(std::move(bw));
          dy = dx;
        }
        if (s > 0 && dx_of[0] >= 0)
          transfer(prog, OpKind::kSend, dx_of[0], recv_gradient_[static_cast<std::size_t>(s - 1)],
                   s - 1);
      }
      ss.end_op = static_cast<std::int64_t>(prog.size());
      ph.slots.push_back(ss);
    }
    // The flush is behind us: every backward of the step has run on this stage.
    std::vector<Op>& tail = post_;
    for (int t : working) free(tail, t);
    for (int k = a; k < b; ++k) {
      if (!has_params(k)) continue;
      if (eval_) {
        for (int param = 0; param < 2; ++param) release(tail, k, param);
        continue;
      }
      const auto& g = grads[static_cast<std::size_t>(k - a)];
      update(tail, k, kWeightParam, g[0]);
      update(tail, k, kBiasParam, g[1]);
    }
    move_ops(post_, prog);
    add_stage_workspace(ph);
    p_.phases.push_back(std::move(ph));
  }

  std::string stage_layers(int a, int b) const {
    std::vector<std::string> names;
    for (int k = a; k < b; ++k) names.push_back(layer(k).name);
    return fmt::format("{}", fmt::join(names, " "));
  }

  // One kWorkspace tensor per stage, as large as its largest op needs, live through the
  // program (the slots' ops follow each other closely; one region serves them all).
  void add_stage_workspace(Phase& ph) {
    std::uint64_t bytes = 0;
    for (const Op& o : ph.ops) bytes = std::max(bytes, op_workspace_bytes(o, p_));
    if (bytes == 0) return;
    const int t = tensor(fmt::format("stage{}.workspace", ph.stage), TensorClass::kWorkspace,
                         DType::kFloat32, {static_cast<std::int64_t>(bytes / 4)});
    for (Op& o : ph.ops)
      if (op_workspace_bytes(o, p_) > 0) o.workspace = t;
    std::vector<Op> head;
    alloc(head, t);
    ph.ops.insert(ph.ops.begin(), std::move(head.front()));
    for (StageSlot& slot : ph.slots) ++slot.first_op, ++slot.end_op;
    free(ph.ops, t);
  }

  // ---- which phases ----

  void plan_phases(std::vector<std::vector<Item>>& phases, std::vector<std::string>& names) {
    if (eval_) {
      plan_eval_phases(phases, names);
      return;
    }
    if (c_.execution.mode == ExecutionMode::kStandard) {
      std::vector<Item> all;
      for (int k = 0; k < n_; ++k) all.push_back({k, false});
      for (int k = n_ - 1; k >= 0; --k) all.push_back({k, true});
      phases.push_back(all);
      names.push_back(c_.remote.optimizer_state ? "forward+loss+backward"
                                                : "forward+loss+backward+optimizer");
      return;
    }
    if (c_.execution.phases_auto) {
      // The phased-execution MNIST example: a forward phase per layer but the last; the
      // last layer's forward, loss, backward and optimizer; then a backward + optimizer
      // phase per layer in reverse.
      for (int k = 0; k + 1 < n_; ++k) phases.push_back({{k, false}});
      phases.push_back({{n_ - 1, false}, {n_ - 1, true}});
      for (int k = n_ - 2; k >= 0; --k) phases.push_back({{k, true}});
    } else {
      std::unordered_map<std::string, int> index;
      for (int k = 0; k < n_; ++k) index.emplace(layer(k).name, k);
      for (std::size_t p = 0; p < c_.execution.phases.size(); ++p) {
        std::vector<Item> items;
        for (const auto& it : c_.execution.phases[p]) {
          const auto found = index.find(it.layer);
          if (found == index.end())
            throw Error("execution.phases[{}]: unknown layer '{}'", p, it.layer);
          items.push_back({found->second, it.pass == Pass::kBackward});
        }
        phases.push_back(items);
      }
      check_phases(phases);
    }
    for (const auto& items : phases) names.push_back(phase_name(items));
  }

  // Evaluation: standard mode, one phase of every forward; phased, a phase per linear
  // layer with the dropout layers before it (the identity in evaluation, they compute
  // nothing), so each phase loads one layer's weights from their home.
  void plan_eval_phases(std::vector<std::vector<Item>>& phases, std::vector<std::string>& names) {
    if (c_.execution.mode == ExecutionMode::kStandard) {
      std::vector<Item> all;
      for (int k = 0; k < n_; ++k) all.push_back({k, false});
      phases.push_back(all);
      names.push_back("forward");
      return;
    }
    std::vector<Item> items;
    for (int k = 0; k < n_; ++k) {
      items.push_back({k, false});
      if (!has_params(k)) continue;  // validation: the last layer is linear
      phases.push_back(items);
      names.push_back(phase_name(items));
      items.clear();
    }
  }

  // The rules validation guarantees, checked again because the engine relies on them.
  void check_phases(const std::vector<std::vector<Item>>& phases) const {
    std::vector<Item> flat;
    for (const auto& items : phases) flat.insert(flat.end(), items.begin(), items.end());
    bool ok = static_cast<int>(flat.size()) == 2 * n_;
    for (int k = 0; ok && k < n_; ++k) {
      ok = flat[static_cast<std::size_t>(k)].layer == k &&
           !flat[static_cast<std::size_t>(k)].backward &&
           flat[static_cast<std::size_t>(n_ + k)].layer == n_ - 1 - k &&
           flat[static_cast<std::size_t>(n_ + k)].backward;
    }
    if (ok) {
      // The last forward and the last layer's backward share a phase.
      std::size_t pos = 0;
      for (const auto& items : phases) {
        const std::size_t end = pos + items.size();
        const auto last_fwd = static_cast<std::size_t>(n_ - 1);
        if (last_fwd >= pos && last_fwd < end) ok = last_fwd + 1 < end;
        pos = end;
      }
    }
    if (!ok)
      throw Error(
          "execution.phases: every layer's forward and backward must appear once, forwards "
          "in layer order, then backwards in reverse order, the last layer's backward right "
          "after its forward in the same phase");
  }

  std::string phase_name(const std::vector<Item>& items) const {
    std::string name;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      if (it.backward && i > 0 && items[i - 1].layer == it.layer && !items[i - 1].backward)
        continue;  // merged into the forward below
      if (!name.empty()) name += ", ";
      const bool both = !it.backward && i + 1 < items.size() && items[i + 1].layer == it.layer &&
                        items[i + 1].backward;
      const std::string& lname = layer(it.layer).name;
      if (both)
        name += lname + (it.layer == n_ - 1 ? " forward+loss+backward+optimizer"
                                            : " forward+backward+optimizer");
      else
        name += lname + (it.backward ? " backward+optimizer" : " forward");
    }
    return name;
  }

  // ---- activation buffers ----

  // x_j is layer j's output, dx_j its gradient, pre_k layer k's pre-activation.
  void place_activations(const std::vector<std::vector<Item>>& phases) {
    fwd_phase_.assign(static_cast<std::size_t>(n_), -1);
    bwd_phase_.assign(static_cast<std::size_t>(n_), -1);
    for (std::size_t p = 0; p < phases.size(); ++p)
      for (const Item& it : phases[p])
        (it.backward ? bwd_phase_ : fwd_phase_)[static_cast<std::size_t>(it.layer)] =
            static_cast<int>(p);
    x_slot_.assign(static_cast<std::size_t>(n_), {});
    dx_slot_.assign(static_cast<std::size_t>(n_), {});
    pre_slot_.assign(static_cast<std::size_t>(n_), {});
    // Which values cross a phase boundary.
    std::vector<int> x_layers, dx_layers, pre_layers;
    for (int j = 0; j + 1 < n_; ++j) {
      if (fwd_at(j + 1) != fwd_at(j) || (!eval_ && bwd_at(j + 1) != fwd_at(j)))
        x_layers.push_back(j);
      if (!eval_ && bwd_at(j + 1) != bwd_at(j) && needs_dx(j + 1)) dx_layers.push_back(j);
    }
    for (int k = 0; k < n_; ++k)
      if (!eval_ && kind(k).keeps_pre(layer(k)) && bwd_at(k) != fwd_at(k)) pre_layers.push_back(k);
    assign_rows("x", x_layers, x_slot_);
    assign_rows("dx", dx_layers, dx_slot_);
    assign_rows("pre", pre_layers, pre_slot_);
  }

  int fwd_at(int k) const { return fwd_phase_[static_cast<std::size_t>(k)]; }
  int bwd_at(int k) const { return bwd_phase_[static_cast<std::size_t>(k)]; }

  // One batch-serial buffer per width, [micro_batch, width] elements, rows x steps
  // entries; named "x" when all rows have one width, else "x.<width>".
  void assign_rows(const std::string& kind, const std::vector<int>& layers,
                   std::vector<Slot>& slots) {
    std::map<std::int64_t, int> buffer_of_width;
    for (int k : layers) buffer_of_width.emplace(layer(k).out_features, -1);
    for (auto& [width, buffer] : buffer_of_width) {
      RemoteBuffer b;
      b.name = buffer_of_width.size() == 1 ? kind : fmt::format("{}.{}", kind, width);
      b.cls = TensorClass::kActivations;
      b.dtype = DType::kFloat32;
      b.element_shape = {mb_, width};
      b.rows = 0;
      b.steps = steps_;
      b.entry_bytes = static_cast<std::uint64_t>(mb_ * width) * 4;
      buffer = static_cast<int>(p_.buffers.size());
      p_.buffers.push_back(b);
    }
    for (int k : layers) {
      const int b = buffer_of_width[layer(k).out_features];
      slots[static_cast<std::size_t>(k)] = {b, p_.buffers[static_cast<std::size_t>(b)].rows++};
    }
  }

  // ---- tensors and ops ----

  int tensor(const std::string& name, TensorClass cls, DType dtype, const Shape& shape,
             bool always_live = false) {
    std::string key = name;
    // A pipelined plan's stages are devices of their own: a name is per stage.
    const std::string stage_key = stage_ >= 0 ? fmt::format("@{}", stage_) : std::string();
    for (int n = 2;; ++n) {
      const auto it = tensor_of_.find(key + stage_key);
      if (it == tensor_of_.end()) break;
      const DeviceTensor& t = p_.tensors[static_cast<std::size_t>(it->second)];
      if (t.cls == cls && t.dtype == dtype && t.shape == shape && t.always_live == always_live)
        return it->second;
      key = fmt::format("{}#{}", name, n);  // same name, different tensor: keep both
    }
    DeviceTensor t;
    t.stage = stage_;
    t.name = key;
    t.cls = cls;
    t.dtype = dtype;
    t.shape = shape;
    t.nelms = product(shape);
    t.nbytes = static_cast<std::uint64_t>(t.nelms) * static_cast<std::uint64_t>(dtype_size(dtype));
    t.always_live = always_live;
    p_.tensors.push_back(t);
    const int index = static_cast<int>(p_.tensors.size()) - 1;
    tensor_of_.emplace(key + stage_key, index);
    return index;
  }

  const std::string& tname(int t) const { return p_.tensors[static_cast<std::size_t>(t)].name; }

  static Op op(OpKind kind, std::string label) {
    Op o;
    o.kind = kind;
    o.label = std::move(label);
    return o;
  }

  // An op of one tensor, in the list its kind keeps it in (planner/operands.h).
  static void set_tensor(Op& o, int t) {
    switch (o.kind) {
      case OpKind::kFree:
      case OpKind::kRemoteStore:
      case OpKind::kHostStore:
        o.inputs = {t};
        break;
      case OpKind::kAllReduce:
        o.state = {t};
        break;
      default:
        o.outputs = {t};
        break;
    }
  }
  void tensor_op(std::vector<Op>& ops, OpKind kind, int t) {
    Op o = op(kind, tname(t));
    set_tensor(o, t);
    ops.push_back(std::move(o));
  }
  void alloc(std::vector<Op>& ops, int t) { tensor_op(ops, OpKind::kAlloc, t); }
  void free(std::vector<Op>& ops, int t) { tensor_op(ops, OpKind::kFree, t); }
  void remote_load(std::vector<Op>& ops, int buffer, std::int64_t row, std::int64_t entry, int t) {
    const RemoteBuffer& b = p_.buffers[static_cast<std::size_t>(buffer)];
    Op o =
        op(OpKind::kRemoteLoad, entry >= 0 ? fmt::format("{}[{}] -> {}", b.name, entry, tname(t))
                                           : fmt::format("{} row {} -> {}", b.name, row, tname(t)));
    set_tensor(o, t);
    o.buffer = buffer;
    o.row = row;
    o.entry = entry;
    ops.push_back(std::move(o));
  }
  void remote_store(std::vector<Op>& ops, int buffer, std::int64_t row, std::int64_t entry, int t) {
    const RemoteBuffer& b = p_.buffers[static_cast<std::size_t>(buffer)];
    Op o = op(OpKind::kRemoteStore, entry >= 0
                                        ? fmt::format("{} -> {}[{}]", tname(t), b.name, entry)
                                        : fmt::format("{} -> {} row {}", tname(t), b.name, row));
    set_tensor(o, t);
    o.buffer = buffer;
    o.row = row;
    o.entry = entry;
    ops.push_back(std::move(o));
  }
  void host_load(std::vector<Op>& ops, Stream s, int t) {
    Op o = op(OpKind::kHostLoad, fmt::format("{} -> {}", enum_name(s), tname(t)));
    o.stream = s;
    set_tensor(o, t);
    ops.push_back(std::move(o));
  }
  // Shard <-> full within the sharding group: kAllGather or kSliceShard.
  void shard_op(std::vector<Op>& ops, OpKind kind, int src, int dst) {
    Op o = op(kind, fmt::format("{} -> {}", tname(src), tname(dst)));
    o.inputs = {src};
    o.outputs = {dst};
    o.grouping = p_.sharding_grouping;
    ops.push_back(std::move(o));
  }
  void all_gather(std::vector<Op>& ops, int src, int dst) {
    shard_op(ops, OpKind::kAllGather, src, dst);
  }
  void slice_shard(std::vector<Op>& ops, int src, int dst) {
    shard_op(ops, OpKind::kSliceShard, src, dst);
  }

  // ---- one phase ----

  // The name prefix of layer k's tensors in the current phase: its graph's name, so
  // identical layers in different phases share device tensors; the layer's own name
  // when several layers of that graph are in the phase.
  std::string prefix(int k) const {
    const int g = layer(k).graph;
    const auto it = graph_count_.find(g);
    return it != graph_count_.end() && it->second > 1 ? layer(k).name
                                                      : graph_names_[static_cast<std::size_t>(g)];
  }

  void begin_phase(const std::vector<Item>& items) {
    pre_.clear();
    body_.clear();
    post_.clear();
    repeat_tensors_.clear();
    state_.clear();
    graph_count_.clear();
    // Sized by the phase, not the model: a phased plan has 2n phases of one or two items
    // (a standard-mode phase holds all 2n).
    std::unordered_set<int> seen;  // layers
    for (const Item& it : items)
      if (seen.insert(it.layer).second) ++graph_count_[layer(it.layer).graph];
  }

  ParamState& state(int k, int param) { return state_[k * 2 + param]; }

  // Brings the parameter's home on device (loads it when remote).
  int ensure_home(std::vector<Op>& ops, int k, int param) {
    ParamState& s = state(k, param);
    if (s.home >= 0) return s.home;
    const Variable& v =
        var(params_[static_cast<std::size_t>(k)][static_cast<std::size_t>(param)].value);
    if (!v.remote) {
      s.home = v.device_tensor;
      return s.home;
    }
    const std::string base = fmt::format("{}.{}", prefix(k), param_name(param));
    s.home = tensor(v.sharded ? base + ".shard" : base, TensorClass::kWeights, DType::kFloat32,
                    v.sharded ? Shape{v.shard_size} : v.meta_shape);
    s.home_loaded = true;
    alloc(ops, s.home);
    remote_load(ops, v.buffer, -1, v.entry, s.home);
    return s.home;
  }

  // Brings the full tensor on device: the home itself, or all-gathered from the shards.
  int ensure_full(std::vector<Op>& ops, int k, int param) {
    ParamState& s = state(k, param);
    if (s.full >= 0) return s.full;
    const Variable& v =
        var(params_[static_cast<std::size_t>(k)][static_cast<std::size_t>(param)].value);
    const int home = ensure_home(ops, k, param);
    if (!v.sharded) {
      s.full = home;
      return s.full;
    }
    s.full = tensor(fmt::format("{}.{}", prefix(k), param_name(param)), TensorClass::kWeights,
                    DType::kFloat32, v.meta_shape);
    s.full_gathered = true;
    alloc(ops, s.full);
    all_gather(ops, home, s.full);
    return s.full;
  }

  // Frees what this phase brought on device for the parameter, without storing.
  void release(std::vector<Op>& ops, int k, int param) {
    ParamState& s = state(k, param);
    if (s.full_gathered) free(ops, s.full);
    if (s.home_loaded) free(ops, s.home);
    s = {};
  }

  // Loads (or names) a piece of the optimizer's state for the parameter.
  int ensure_state(std::vector<Op>& ops, int var_index, int k, int param) {
    const Variable& v = var(var_index);
    if (!v.remote) return v.device_tensor;
    const std::string_view suffix = std::string_view(v.name).substr(v.name.rfind('.') + 1);
    const int t = tensor(fmt::format("{}.{}.{}", prefix(k), param_name(param), suffix),
                         TensorClass::kOptimizerState, v.dtype,
                         v.sharded ? Shape{v.shard_size} : v.meta_shape);
    alloc(ops, t);
    remote_load(ops, v.buffer, -1, v.entry, t);
    return t;
  }

  void done_with_state(std::vector<Op>& ops, int var_index, int t) {
    const Variable& v = var(var_index);
    if (!v.remote) return;
    remote_store(ops, v.buffer, -1, v.entry, t);
    free(ops, t);
  }

  // The optimizer on `weight` with `grad`: its state loaded (when remote), the step, the
  // gradient freed, the state stored home. The order sets the phase's peak.
  void optimize(std::vector<Op>& ops, const ParamVars& pv, int k, int param, int weight, int grad) {
    Op o = op(OpKind::kOptimizerStep,
              fmt::format("{} {}", c_.training.optimizer.type, var(pv.value).name));
    o.layer = var(pv.value).layer;
    o.variable = pv.value;
    o.inputs = {grad};
    o.state = {weight};
    for (int v : pv.state) o.state.push_back(ensure_state(ops, v, k, param));
    ops.push_back(o);
    free(ops, grad);
    for (std::size_t i = 0; i < pv.state.size(); ++i)
      done_with_state(ops, pv.state[i], o.state[optimizer_operand::kFirstState + i]);
  }

  // Reduces the accumulated gradient over the variables' grouping (mean over the
  // replicas that hold one value), runs Adam, stores the variable and state home and
  // frees everything of the parameter. Sharded ↔ unsharded as plan.h prescribes.
  void update(std::vector<Op>& ops, int k, int param, int grad) {
    const ParamVars& pv = params_[static_cast<std::size_t>(k)][static_cast<std::size_t>(param)];
    const Variable& w = var(pv.value);
    const bool ws = w.sharded;
    // Where the optimizer's state is sharded the update runs on shards. An optimizer
    // without state (SGD without momentum) updates where the weight lives.
    const bool ss = pv.state.empty() ? w.sharded : var(pv.state[0]).sharded;
    const std::string base = fmt::format("{}.{}", prefix(k), param_name(param));
    ParamState& s = state(k, param);
    int home = ensure_home(ops, k, param);
    if (ss) {
      // The state is sharded: Adam on shards, the gradient reduce-scattered.
      if (ws && s.full_gathered) {
        free(ops, s.full);  // the full copy is stale after the update
        s.full = -1;
        s.full_gathered = false;
      }
      // The state's shard size: the weight's own is its full size when only the state is sharded.
      const std::int64_t shard_size = pv.state.empty() ? w.shard_size : var(pv.state[0]).shard_size;
      const int grad_shard = tensor(base + ".grad.shard", TensorClass::kGradAccumulators,
                                    DType::kFloat32, {shard_size});
      alloc(ops, grad_shard);
      Op rs = op(OpKind::kReduceScatter,
                 fmt::format("{} -> {} (mean)", tname(grad), tname(grad_shard)));
      rs.inputs = {grad};
      rs.outputs = {grad_shard};
      rs.grouping = p_.variables_grouping;
      rs.shard_grouping = p_.sharding_grouping;
      rs.reduce = ReduceOp::kMean;
      ops.push_back(std::move(rs));
      free(ops, grad);
      int weight_shard = home;
      if (!ws) {
        // Weight full, state sharded: slice this replica's shard, update it, gather back.
        weight_shard =
            tensor(base + ".shard", TensorClass::kWeights, DType::kFloat32, {shard_size});
        alloc(ops, weight_shard);
        slice_shard(ops, home, weight_shard);
      }
      optimize(ops, pv, k, param, weight_shard, grad_shard);
      if (!ws) {
        all_gather(ops, weight_shard, home);
        free(ops, weight_shard);
      }
    } else {
      // The state is full: all-reduce the gradient, Adam on the full weight.
      Op ar = op(OpKind::kAllReduce, fmt::format("{} (mean)", tname(grad)));
      ar.state = {grad};
      ar.grouping = p_.variables_grouping;
      ar.reduce = ReduceOp::kMean;
      ops.push_back(std::move(ar));
      const int full = ensure_full(ops, k, param);
      optimize(ops, pv, k, param, full, grad);
      if (ws) {
        // Sharded weight, full state: back to this replica's home shard.
        slice_shard(ops, full, home);
        free(ops, full);
        s.full = -1;
        s.full_gathered = false;
      }
    }
    if (w.remote) remote_store(ops, w.buffer, -1, w.entry, home);
    release(ops, k, param);
  }

  // A tensor the repeat body uses, allocated before the loop and freed after it.
  int repeat_tensor(const std::string& name, TensorClass cls, const Shape& shape) {
    const int t = tensor(name, cls, DType::kFloat32, shape);
    alloc(pre_, t);
    repeat_tensors_.push_back(t);
    return t;
  }

  void build_phase(const std::string& name, const std::vector<Item>& items, bool defer_optimizer) {
    begin_phase(items);
    // Values on device inside the loop: x[j + 1] is layer j's output (x[0] the images),
    // pre[k], dx[j + 1] the gradient of x[j + 1].
    // Maps, not vectors of n + 1: a phase touches a few layers (2n phases in a phased plan).
    LayerValues x, dx;
    std::unordered_map<int, int> pre;
    std::vector<std::pair<int, std::array<int, 2>>> grads;  // layer, {weight, bias}

    auto input_of = [&](int k) {  // x[k], loading it when it is not on device
      int& t = x.at(k);
      if (t >= 0) return t;
      if (k == 0) {
        // The first layer's input: the images, streamed from the host (again in the
        // first layer's backward phase rather than kept in a buffer).
        t = repeat_tensor("images", TensorClass::kIoSlots, {mb_, layer(0).in_features});
        host_load(body_, Stream::kImages, t);
      } else {
        const Slot& s = x_slot_[static_cast<std::size_t>(k - 1)];
        POPKIT_ASSERT(s.buffer >= 0);
        t = repeat_tensor(prefix(k) + ".in", TensorClass::kIoSlots, {mb_, layer(k).in_features});
        remote_load(body_, s.buffer, s.row, -1, t);
      }
      return t;
    };

    auto output_grad_of = [&](int k) {  // dx[k + 1], loading it when it is not on device
      int& t = dx.at(k + 1);
      if (t >= 0) return t;
      const Slot& s = dx_slot_[static_cast<std::size_t>(k)];
      POPKIT_ASSERT(s.buffer >= 0);
      t = repeat_tensor(prefix(k) + ".dy", TensorClass::kIoSlots, {mb_, layer(k).out_features});
      remote_load(body_, s.buffer, s.row, -1, t);
      return t;
    };
    auto store_input_grad = [&](int k, int t) {  // dx[k] to its buffer when a later phase reads it
      const Slot& s = dx_slot_[static_cast<std::size_t>(k - 1)];
      if (s.buffer >= 0) remote_store(body_, s.buffer, s.row, -1, t);
    };

    // Parameters first: loaded once per phase, all-gathered where sharded.
    for (const Item& it : items) {
      if (!has_params(it.layer)) continue;
      const bool needs_weight = !it.backward || needs_dx(it.layer);  // backward needs W for dx
      if (needs_weight) ensure_full(pre_, it.layer, kWeightParam);
      if (!it.backward) ensure_full(pre_, it.layer, kBiasParam);
    }
    // Free a loaded shard once gathered when this phase does not update the parameter.
    std::unordered_set<int> updated;  // layers
    for (const Item& it : items)
      if (it.backward) updated.insert(it.layer);
    for (const Item& it : items) {
      if (it.backward || updated.count(it.layer)) continue;
      for (int param = 0; param < 2; ++param) {
        ParamState& s = state(it.layer, param);
        if (s.full_gathered && s.home_loaded) {
          free(pre_, s.home);
          s.home_loaded = false;
          s.home = -1;
        }
      }
    }

    for (const Item& it : items) {
      const int k = it.layer;
      const LayerInfo& l = layer(k);
      const std::string p = prefix(k);
      if (!it.backward && eval_ && kind(k).identity_in_eval) {
        // Dropout in evaluation: the identity, no op; its output is its input.
        x.at(k + 1) = input_of(k);
        const Slot& xs = x_slot_[static_cast<std::size_t>(k)];
        if (xs.buffer >= 0) remote_store(body_, xs.buffer, xs.row, -1, x.at(k + 1));
        continue;
      }
      if (!it.backward) {
        Op f = op(OpKind::kForward, l.name);
        f.layer = k;
        const int in = input_of(k);
        int pre_k = -1;
        // Evaluation keeps no pre-activation: nothing runs a backward.
        if (!eval_ && has_params(k) && kind(k).keeps_pre(l)) {
          pre_k = repeat_tensor(p + ".pre", TensorClass::kActivations, {mb_, l.out_features});
          pre[k] = pre_k;
        }
        const int out = repeat_tensor(p + ".out", TensorClass::kActivations, {mb_, l.out_features});
        if (has_params(k)) {  // forward_operand: {in, weight, bias} -> {out, pre}
          f.inputs = {in, state(k, kWeightParam).full, state(k, kBiasParam).full};
          f.outputs = {out, pre_k};
        } else {  // without parameters: {in} -> {out}
          f.inputs = {in};
          f.outputs = {out};
        }
        x.at(k + 1) = out;
        body_.push_back(std::move(f));
        const Slot& xs = x_slot_[static_cast<std::size_t>(k)];
        if (xs.buffer >= 0) remote_store(body_, xs.buffer, xs.row, -1, out);
        const Slot& ps = pre_slot_[static_cast<std::size_t>(k)];
        if (ps.buffer >= 0) remote_store(body_, ps.buffer, ps.row, -1, pre_k);
        if (k == n_ - 1 && eval_) {
          // The host scores the logits (engine/engine.h, Engine::evaluate).
          Op hs = op(OpKind::kHostStore, "logits -> host");
          hs.stream = Stream::kLogits;
          set_tensor(hs, out);
          body_.push_back(std::move(hs));
        } else if (k == n_ - 1) {
          const int labels = repeat_tensor("labels", TensorClass::kIoSlots, {mb_});
          host_load(body_, Stream::kLabels, labels);
          Op loss = op(OpKind::kLoss, std::string(enum_name(c_.model.loss)));
          const int value = repeat_tensor("loss", TensorClass::kActivations, {1});
          const int dlogits =
              repeat_tensor("dlogits", TensorClass::kActivations, {mb_, l.out_features});
          loss.inputs = {out, labels};
          loss.outputs = {value, dlogits};
          dx.at(n_) = dlogits;
          body_.push_back(std::move(loss));
          Op hs = op(OpKind::kHostStore, "loss -> host");
          hs.stream = Stream::kLoss;
          set_tensor(hs, value);
          body_.push_back(std::move(hs));
        }
        continue;
      }
      // Backward of layer k.
      if (!has_params(k)) {
        // Dropout (dx = dy * mask / (1 - rate)), only when a layer before it trains.
        if (!needs_dx(k)) continue;
        const int dy = output_grad_of(k);
        Op b = op(OpKind::kBackward, l.name);
        b.layer = k;
        const int dx_k = repeat_tensor(p + ".dx", TensorClass::kActivations, {mb_, l.in_features});
        b.inputs = {dy};
        b.outputs = {dx_k};
        dx.at(k) = dx_k;
        body_.push_back(std::move(b));
        store_input_grad(k, dx_k);
        continue;
      }
      namespace bo = backward_operand;
      Op b = op(OpKind::kBackward, l.name);
      b.layer = k;
      b.inputs = {-1, -1, -1};
      b.outputs = {-1};
      b.state = {-1, -1, -1};
      const int dy = output_grad_of(k);
      b.state[bo::kDy] = dy;
      b.inputs[bo::kIn] = input_of(k);
      if (kind(k).keeps_pre(l)) {
        auto found = pre.find(k);
        if (found == pre.end()) {
          const Slot& s = pre_slot_[static_cast<std::size_t>(k)];
          POPKIT_ASSERT(s.buffer >= 0);
          const int t =
              repeat_tensor(p + ".pre.saved", TensorClass::kIoSlots, {mb_, l.out_features});
          remote_load(body_, s.buffer, s.row, -1, t);
          found = pre.emplace(k, t).first;
        }
        b.inputs[bo::kPre] = found->second;
      }
      if (needs_dx(k)) {
        b.inputs[bo::kWeight] = state(k, kWeightParam).full;
        b.outputs[bo::kDx] =
            repeat_tensor(p + ".dx", TensorClass::kActivations, {mb_, l.in_features});
        dx.at(k) = b.outputs[bo::kDx];
      }
      const int gw = tensor(p + ".weight.grad", TensorClass::kGradAccumulators, DType::kFloat32,
                            {l.in_features, l.out_features});
      const int gb = tensor(p + ".bias.grad", TensorClass::kGradAccumulators, DType::kFloat32,
                            {l.out_features});
      // No zero op: the backward of repeat step 0 writes the accumulators whole (acc = g,
      // popxl-addons' running mean at s = 0). engine.measured_memory's poisoning test
      // checks that nothing reads them, or any tensor, before that first write.
      for (int g : {gw, gb}) alloc(pre_, g);
      grads.push_back({k, {gw, gb}});
      b.state[bo::kGradWeight] = gw;
      b.state[bo::kGradBias] = gb;
      const int dx_k = b.outputs[bo::kDx];
      body_.push_back(std::move(b));
      if (needs_dx(k)) store_input_grad(k, dx_k);
    }

    double_buffer();
    Op rep = op(OpKind::kRepeat, fmt::format("{} steps", steps_));
    rep.steps = steps_;
    rep.io_mode = p_.io_mode;
    move_ops(body_, rep.body);
    std::vector<Op>& ops = post_;  // after the loop
    for (int t : repeat_tensors_) free(ops, t);

    if (defer_optimizer) {
      for (const Item& it : items)
        for (int param = 0; param < 2; ++param) release(ops, it.layer, param);
      deferred_grads_ = grads;
    } else {
      for (const auto& [k, g] : grads) {
        update(ops, k, kWeightParam, g[0]);
        update(ops, k, kBiasParam, g[1]);
      }
      for (const Item& it : items)
        for (int param = 0; param < 2; ++param) release(ops, it.layer, param);
    }
    Phase ph;
    ph.name = name;
    ph.ops.reserve(pre_.size() + 1 + post_.size());
    move_ops(pre_, ph.ops);
    ph.ops.push_back(std::move(rep));
    move_ops(post_, ph.ops);
    p_.phases.push_back(std::move(ph));
  }

  // Appends `from`'s ops to `to` and empties `from`, which keeps its capacity: the
  // phase's ops are built in the builder's vectors, reused from phase to phase, and
  // moved once into vectors of their final size (a vector grown op by op per phase
  // reallocates and moves each op about twice).
  static void move_ops(std::vector<Op>& from, std::vector<Op>& to) {
    if (to.empty()) to.reserve(from.size());
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
    from.clear();
  }

  void build_optimizer_phase(const std::string& name) {
    std::vector<Item> items;
    for (const auto& [k, g] : deferred_grads_) items.push_back({k, true});
    begin_phase(items);
    std::vector<Op> ops;
    for (const auto& [k, g] : deferred_grads_) {
      update(ops, k, kWeightParam, g[0]);
      update(ops, k, kBiasParam, g[1]);
    }
    Phase ph;
    ph.name = name;
    ph.ops = std::move(ops);
    p_.phases.push_back(std::move(ph));
  }

  // io_overlapped: the next step's loads (and the previous step's stores) run while this
  // step computes, so every tensor the loop streams has a second slot.
  void double_buffer() {
    if (p_.io_mode != IoMode::kIoOverlapped) return;
    std::unordered_set<int> streamed;  // tensors; sized by the loop, not the plan
    for (const Op& o : body_)
      if (o.kind == OpKind::kHostLoad || o.kind == OpKind::kHostStore ||
          o.kind == OpKind::kRemoteLoad || o.kind == OpKind::kRemoteStore)
        streamed.insert(the_tensor(o));
    const std::vector<int> loop_tensors = repeat_tensors_;
    for (int t : loop_tensors) {
      DeviceTensor& d = p_.tensors[static_cast<std::size_t>(t)];
      const bool is_streamed = streamed.count(t) != 0;
      if (!is_streamed && d.double_buffer < 0) continue;
      if (d.double_buffer < 0) {
        const int slot = tensor(d.name + ".slot1", d.cls, d.dtype, d.shape);
        p_.tensors[static_cast<std::size_t>(t)].double_buffer = slot;
      }
      const int slot = p_.tensors[static_cast<std::size_t>(t)].double_buffer;
      alloc(pre_, slot);
      repeat_tensors_.push_back(slot);
    }
  }

  // ---- execution.io_schedule: preload ----

  // PopART's Preload IO schedule: the remote weights a phase loads before its compute
  // loop are loaded during the phase before instead, so the load can overlap that
  // phase's compute. Each moved load gets a tensor of its own (the home's name with
  // ".preload" and the parity of the phase that uses it), as the phase before may be
  // using the home's tensor itself (fc2 and fc3 share "inner.weight.shard"); the ops of
  // the using phase read it under that name up to its free. The moved alloc and load go
  // to the start of the phase before, so the memory walk plans them there: the loaded
  // bytes are live one phase longer. Same values, same order of arithmetic: the weights
  // are bitwise those of on_demand.
  void preload_next_phase_loads() {
    for (std::size_t p = 1; p < p_.phases.size(); ++p) {
      std::vector<Op>& ops = p_.phases[p].ops;
      // The allocs go first, then the loads: the engine may hand the loads to its IO
      // thread as one piece, whose tensors must all be allocated by then.
      std::vector<Op> moved_allocs, moved;
      std::vector<std::pair<int, int>> renamed;  // (home tensor, preload tensor)
      std::vector<Op> kept;
      kept.reserve(ops.size());
      bool before_loop = true;
      for (const Op& o : ops) {
        if (o.kind == OpKind::kRepeat) before_loop = false;
        const bool weight_load =
            before_loop && o.kind == OpKind::kRemoteLoad && o.entry >= 0 &&
            p_.buffers[static_cast<std::size_t>(o.buffer)].cls == TensorClass::kWeights &&
            !kept.empty() && kept.back().kind == OpKind::kAlloc &&
            planner::the_tensor(kept.back()) == planner::the_tensor(o) &&
            !stores_to(p_.phases[p - 1].ops, o.buffer, o.entry);
        if (!weight_load) {
          kept.push_back(o);
          continue;
        }
        const int home = planner::the_tensor(o);
        const DeviceTensor d =
            p_.tensors[static_cast<std::size_t>(home)];  // tensor() may grow them
        const int next =
            tensor(fmt::format("{}.preload{}", d.name, p % 2), d.cls, d.dtype, d.shape);
        kept.pop_back();  // the alloc moves with the load
        alloc(moved_allocs, next);
        moved_allocs.back().preload = true;
        remote_load(moved, o.buffer, -1, o.entry, next);
        moved.back().preload = true;
        renamed.emplace_back(home, next);
      }
      if (moved.empty()) continue;
      moved.insert(moved.begin(), std::make_move_iterator(moved_allocs.begin()),
                   std::make_move_iterator(moved_allocs.end()));
      for (const auto& [home, next] : renamed) {
        bool freed = false;
        for (auto& o : kept) rename_until_free(o, home, next, freed);
      }
      ops = std::move(kept);
      std::vector<Op>& before = p_.phases[p - 1].ops;
      before.insert(before.begin(), std::make_move_iterator(moved.begin()),
                    std::make_move_iterator(moved.end()));
    }
  }

  // Whether `ops` store to the entry: a load moved before that store would read the old
  // value (no phase stores weights the next one uses, but the check keeps it so).
  static bool stores_to(const std::vector<Op>& ops, int buffer, std::int64_t entry) {
    return std::any_of(ops.begin(), ops.end(), [&](const Op& o) {
      return (o.kind == OpKind::kRemoteStore && o.buffer == buffer && o.entry == entry) ||
             stores_to(o.body, buffer, entry);
    });
  }

  // Replaces `from` by `to` in the op's operands (and its body's) until the free of
  // `from`, which is renamed too and sets `freed`.
  void rename_until_free(Op& o, int from, int to, bool& freed) {
    if (freed) return;
    bool renamed = false;
    for (auto* list : {&o.inputs, &o.outputs, &o.state})
      for (int& t : *list)
        if (t == from) t = to, renamed = true;
    if (renamed) o.label = relabel(o.label, tname(from), tname(to));
    for (Op& inner : o.body) rename_until_free(inner, from, to, freed);
    if (o.kind == OpKind::kFree && renamed) freed = true;
  }

  // The label with the whole word `from` (between spaces or the ends) replaced by `to`.
  static std::string relabel(const std::string& label, const std::string& from,
                             const std::string& to) {
    std::string out;
    std::size_t at = 0;
    while (at <= label.size()) {
      std::size_t end = label.find(' ', at);
      if (end == std::string::npos) end = label.size();
      const std::string word = label.substr(at, end - at);
      out += word == from ? to : word;
      if (end < label.size()) out += ' ';
      at = end + 1;
    }
    return out;
  }

  // ---- memory, cost, fit ----

  void finish() {
    annotate_costs(p_);
    const DeviceProfile* profile = device_profile(c_);
    p_.device_profile = profile->name;
    p_.device_kind = profile->is_cpu() ? "cpu" : "ipu";
    p_.device_core_round_trip_seconds = profile->core_round_trip_seconds;
    p_.device_cache_probe_seconds = profile->cache_probe_seconds;
    p_.memory_per_replica =
        c_.device.memory_per_replica != 0 ? c_.device.memory_per_replica : profile->memory_bytes;
    p_.io_tiles = c_.execution.io_tiles;
    // The memory walk and the host bytes first: on a CPU the cost model prices the cold
    // part of the remote store's copies from the bytes a step cycles through.
    const MemoryWalk walk = analyse_memory(p_);
    p_.host_bytes_per_step = 0;
    for (const auto& ph : p_.phases)
      for (const auto& o : ph.ops) p_.host_bytes_per_step += o.host_bytes;
    estimate_time(p_, *profile);
    p_.fits = p_.peak_bytes <= p_.memory_per_replica;
    if (!p_.fits) report_not_fitting(walk);
  }

  void report_not_fitting(const MemoryWalk& walk) {
    NotFitting& nf = p_.not_fitting;
    nf.phase = p_.phases[static_cast<std::size_t>(p_.peak_phase)].name;
    nf.bytes_over = p_.peak_bytes - p_.memory_per_replica;
    const std::vector<int> live = live_tensors_at_peak(p_, walk, p_.peak_phase);
    for (std::size_t i = 0; i < live.size() && i < 5; ++i) {
      const DeviceTensor& t = p_.tensors[static_cast<std::size_t>(live[i])];
      nf.largest.push_back(fmt::format("{} ({})", t.name, format_bytes(t.nbytes)));
    }
    const ClassBytes& by = p_.phases[static_cast<std::size_t>(p_.peak_phase)].memory.peak_by_class;
    auto cls = [&](TensorClass c) { return by[static_cast<std::size_t>(c)]; };
    std::int64_t smallest_unsharded = 0;
    for (const auto& v : p_.variables)
      if (!v.sharded &&
          (v.cls == TensorClass::kWeights ? c_.sharding.weights : c_.sharding.optimizer_state))
        smallest_unsharded = std::max(smallest_unsharded, v.nelms);
    if (c_.replication.factor > 1 && !sharding_on_)
      nf.suggestions.push_back(fmt::format(
          "enable replicated tensor sharding (sharding:) to split weights and optimizer state "
          "over the replicas of a group"));
    else if (sharding_on_ && smallest_unsharded > 0)
      nf.suggestions.push_back(fmt::format(
          "lower sharding.threshold (now {}) to at most {} so the largest unsharded variable "
          "is sharded too",
          c_.sharding.threshold, smallest_unsharded));
    if (!c_.remote.optimizer_state && cls(TensorClass::kOptimizerState) > 0)
      nf.suggestions.push_back(fmt::format(
          "remote.optimizer_state: true keeps the optimizer state ({}) in streaming memory",
          format_bytes(cls(TensorClass::kOptimizerState))));
    const bool standard = c_.execution.mode == ExecutionMode::kStandard;
    // Remote weights need phased execution (standard mode keeps weights on device).
    if (!c_.remote.weights && cls(TensorClass::kWeights) > 0)
      nf.suggestions.push_back(fmt::format(
          "remote.weights: true{} keeps the weights ({}) in streaming memory between uses",
          standard ? " with execution.mode: phased" : "",
          format_bytes(cls(TensorClass::kWeights))));
    if (standard && n_ > 1)
      nf.suggestions.push_back(
          "execution.mode: phased holds one layer's variables and activations at a time");
    if (p_.io_mode == IoMode::kIoOverlapped)
      nf.suggestions.push_back("execution.io_mode: io needs one IO slot per stream instead of two");
    if (mb_ > 1 && cls(TensorClass::kActivations) + cls(TensorClass::kIoSlots) > 0)
      nf.suggestions.push_back(fmt::format(
          "a smaller training.micro_batch_size (now {}) with a larger "
          "training.gradient_accumulation keeps the global batch with fewer activation bytes",
          mb_));
  }

  const config::Config& c_;
  bool eval_ = false;  // an evaluation plan (Program::kEval)
  Plan p_;
  int n_ = 0;
  std::int64_t mb_ = 1;
  std::int64_t steps_ = 1;
  bool sharding_on_ = false;
  std::vector<std::vector<int>> graph_layers_;  // per graph, its layers in order
  std::vector<std::string> graph_names_;
  std::vector<std::array<ParamVars, 2>> params_;  // per layer: weight, bias
  std::unordered_map<std::string, int> tensor_of_;
  std::vector<int> fwd_phase_, bwd_phase_;
  std::vector<Slot> x_slot_, dx_slot_, pre_slot_;
  std::vector<bool> params_before_;  // per layer: a layer before it has parameters
  // Pipelined: each layer's stage, the stage whose tensors are being made (-1: none),
  // each stage's receive buffers (-1: none).
  std::vector<int> stage_of_layer_;
  int stage_ = -1;
  std::vector<int> recv_activation_, recv_gradient_;

  // The phase being built.
  std::vector<Op> pre_, body_, post_;  // before, inside and after the repeat loop
  std::vector<int> repeat_tensors_;
  std::unordered_map<int, ParamState> state_;
  std::unordered_map<int, int> graph_count_;
  std::vector<std::pair<int, std::array<int, 2>>> deferred_grads_;
};

}  // namespace

const DeviceProfile* device_profile(const config::Config& config) {
  if (!config.device.resolved)
    throw Error(
        "device.profile '{}' was not read: load the config with config/yaml (which reads the "
        "profile file), or set device.resolved in a config built in code",
        config.device.profile);
  return &*config.device.resolved;
}

Plan build_plan_for_estimate(const config::Config& config) {
  return Builder(config, Program::kTrain).build();
}

Plan build_plan(const config::Config& config, Program program, const Plan* eval,
                const NetworkProfile* network) {
  Plan plan = Builder(config, program).build();
  if (network != nullptr) {
    // Priced again with the network; the builder has checked the profile.
    estimate_time(plan, *device_profile(config), network);
  }
  const DatasetSizes sizes = dataset_sizes_from_config(config);
  if (program == Program::kEval) {
    plan.host_memory = estimate_host_memory(plan, nullptr, config, sizes, HostUse::kEvaluate);
  } else if (eval != nullptr) {
    plan.host_memory = estimate_host_memory(plan, eval, config, sizes, HostUse::kTrain);
  } else {
    // Training evaluates too: poprun holds the evaluation plan's engine beside training's.
    const Plan own = Builder(config, Program::kEval).build();
    plan.host_memory = estimate_host_memory(plan, &own, config, sizes, HostUse::kTrain);
  }
  return plan;
}

}  // namespace popkit::planner
