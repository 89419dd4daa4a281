// What the builder's parts (planner/build*.cpp) share while they build one Plan: the
// config, the plan so far, the layers' graphs and variables, the tensor and op helpers
// every part adds with, and the naming scope of the program being built. Internal to
// the planner; build.h is the entry point.
//
// The parts, each a file: build.cpp (the order of the work, fit and not-fitting),
// build_variables.cpp (variables and their homes), build_params.cpp (a parameter's
// forms on device within a program: loaded, gathered, updated), build_layer_ops.cpp (a
// layer's forward and backward op from its kind's declarations: the one place ops are
// made, for every program), build_schedule.cpp (which phases), build_phase.cpp (a
// phase's program), build_stage.cpp (a pipeline stage's program), build_preload.cpp
// (execution.io_schedule: preload).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/config.h"
#include "planner/layer_kinds.h"
#include "planner/plan.h"

namespace popkit::planner::build {

using config::ExecutionMode;

// One item of a phase or stage program: a layer's forward, or its backward (with, in a
// phase, the gradient reduction and the optimizer step of its parameters).
struct Item {
  int layer = 0;
  bool backward = false;
};

// The variables of one parameter of a layer: its value and the optimizer's state for it
// (optimizer_state() says what and in which order).
struct ParamVars {
  int value = -1;
  std::vector<int> state;
};

struct BuildState {
  BuildState(const config::Config& config, Program program)
      : c(config), eval(program == Program::kEval) {}

  const config::Config& c;
  const bool eval;  // an evaluation plan (Program::kEval)
  Plan p;
  int n = 0;               // layers
  std::int64_t mb = 1;     // the plan's micro-batch
  std::int64_t steps = 1;  // repeat steps: gradient accumulation
  bool sharding_on = false;
  std::vector<std::vector<int>> graph_layers;  // per graph, its layers in order
  std::vector<std::string> graph_names;
  std::vector<std::vector<ParamVars>> params;  // per layer, per parameter of its kind
  // Per layer, per parameter: the layer and parameter whose variable it is, itself but for
  // a tied parameter (planner/layer_kinds.h's ParamSpec::tie_key).
  std::vector<std::vector<std::pair<int, int>>> owners;
  std::vector<bool> params_before;  // per layer: a layer before it has parameters
  // Pipelined: each layer's stage; the stage whose tensors are being made (-1: none).
  std::vector<int> stage_of_layer;
  int stage = -1;

  [[nodiscard]] const LayerInfo& layer(int k) const {
    return p.layers[static_cast<std::size_t>(k)];
  }
  [[nodiscard]] const LayerKind& kind(int k) const { return layer_kind(layer(k).kind); }
  [[nodiscard]] bool has_params(int k) const { return !kind(k).params.empty(); }
  // Layer k's backward computes its input's gradient only when a layer before it trains.
  [[nodiscard]] bool needs_dx(int k) const { return params_before[static_cast<std::size_t>(k)]; }
  [[nodiscard]] const Variable& var(int index) const {
    return p.variables[static_cast<std::size_t>(index)];
  }
  [[nodiscard]] const ParamVars& param_vars(int k, int param) const {
    return params[static_cast<std::size_t>(k)][static_cast<std::size_t>(param)];
  }
  [[nodiscard]] std::pair<int, int> owner(int k, int param) const {
    return owners[static_cast<std::size_t>(k)][static_cast<std::size_t>(param)];
  }
  [[nodiscard]] bool owns(int k, int param) const {
    return owner(k, param) == std::pair<int, int>(k, param);
  }
  [[nodiscard]] std::int64_t n_shards() const { return p.sharding_grouping.group_size; }
  // A micro-batch's labels: [mb] class ids, or [mb, positions] next tokens.
  [[nodiscard]] Shape labels_shape() const {
    return p.positions == 1 ? Shape{mb} : Shape{mb, p.positions};
  }

  // ---- the naming scope of the program being built ----

  // Starts a program (a phase, a stage) of these items.
  void begin_scope(const std::vector<Item>& items);
  // The name prefix of layer k's tensors in the program: its graph's name, so identical
  // layers in different programs share device tensors; the layer's own name when several
  // layers of that graph are in the program.
  [[nodiscard]] std::string prefix(int k) const;

  // ---- tensors and ops ----

  // The device tensor `name` of the current stage, made when new. A name already taken
  // by another tensor (other class, dtype, shape or liveness) gets "#2", "#3", ...
  int tensor(const std::string& name, TensorClass cls, DType dtype, const Shape& shape,
             bool always_live = false);
  [[nodiscard]] const std::string& tname(int t) const {
    return p.tensors[static_cast<std::size_t>(t)].name;
  }
  static Op op(OpKind kind, std::string label);
  // An op of one tensor, in the list its kind keeps it in (planner/operands.h).
  static void set_tensor(Op& o, int t);
  void tensor_op(std::vector<Op>& ops, OpKind kind, int t);
  void alloc(std::vector<Op>& ops, int t) { tensor_op(ops, OpKind::kAlloc, t); }
  void free(std::vector<Op>& ops, int t) { tensor_op(ops, OpKind::kFree, t); }
  // entry >= 0: that entry; entry < 0: batch-serial, row `row` (plan.h).
  void remote_load(std::vector<Op>& ops, int buffer, std::int64_t row, std::int64_t entry, int t);
  void remote_store(std::vector<Op>& ops, int buffer, std::int64_t row, std::int64_t entry, int t);
  void host_load(std::vector<Op>& ops, Stream s, int t);
  void host_store(std::vector<Op>& ops, Stream s, int t);
  // Shard <-> full within the sharding group.
  void all_gather(std::vector<Op>& ops, int src, int dst);
  void slice_shard(std::vector<Op>& ops, int src, int dst);
  // kSend or kRecv between stages.
  void transfer(std::vector<Op>& ops, OpKind kind, int src, int dst, int peer);
  // sum += addend: a tied parameter's gradient into its owner's.
  void add(std::vector<Op>& ops, int sum, int addend);

  // Appends `from`'s ops to `to` and empties `from`, which keeps its capacity: a program's
  // ops are built in vectors reused from program to program, and moved once into vectors
  // of their final size (a vector grown op by op reallocates and moves each op about twice).
  static void move_ops(std::vector<Op>& from, std::vector<Op>& to);

 private:
  void shard_op(std::vector<Op>& ops, OpKind kind, int src, int dst);

  std::unordered_map<std::string, int> tensor_of_;
  std::unordered_map<int, int> graph_count_;  // the scope's layers per graph
};

}  // namespace popkit::planner::build
