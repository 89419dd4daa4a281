// The builder's parts (build_state.h lists them), as build.cpp calls them. Internal to
// the planner.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "planner/build_state.h"
#include "planner/layer_ops.h"

namespace popkit::planner::build {

// ---- build_variables.cpp ----

// Every parameter the layers' kinds declare, and (training) the optimizer's state for
// each: Variables with their homes and initial values, remote buffers, setup allocations.
void add_variables(BuildState& b);

// ---- build_params.cpp ----

// A parameter's forms on device within the program being built: its home (loaded when
// remote), its full tensor (gathered when sharded), and its update at the step's end.
class ParamForms {
 public:
  explicit ParamForms(BuildState& b) : b_(b) {}

  void reset() { forms_.clear(); }  // a new program
  // Brings the parameter's home on device (loads it when remote).
  int ensure_home(std::vector<Op>& ops, int k, int param);
  // Brings the full tensor on device: the home itself, or all-gathered from the shards.
  int ensure_full(std::vector<Op>& ops, int k, int param);
  // The full tensor ensure_full brought (-1 before).
  int full(int k, int param) { return forms(k, param).full; }
  // Frees what this program brought on device for the parameter, without storing.
  void release(std::vector<Op>& ops, int k, int param);
  void release_layer(std::vector<Op>& ops, int k);
  // Frees the loaded shard of a gathered parameter: a program that does not update it
  // needs only the full tensor.
  void free_gathered_home(std::vector<Op>& ops, int k, int param);
  // Reduces the accumulated gradient over the variables' grouping (mean over the replicas
  // that hold one value), runs the optimizer, stores the variable and state home and
  // frees everything of the parameter. Sharded <-> unsharded as plan.h prescribes.
  void update(std::vector<Op>& ops, int k, int param, int grad);

 private:
  struct Forms {
    int home = -1;               // what the variable's home holds: the shard, or the full tensor
    bool home_loaded = false;    // loaded from its remote buffer in this program
    int full = -1;               // the full (meta shape) tensor compute reads
    bool full_gathered = false;  // all-gathered in this program
  };
  Forms& forms(int k, int param);
  std::string base(int k, int param) const;  // "<prefix>.<suffix>"
  // Loads (or names) a piece of the optimizer's state for the parameter; stores it back.
  int ensure_state(std::vector<Op>& ops, int var_index, int k, int param);
  void done_with_state(std::vector<Op>& ops, int var_index, int t);
  // The optimizer on `weight` with `grad`: its state loaded (when remote), the step, the
  // gradient freed, the state stored home. The order sets the program's peak.
  void optimize(std::vector<Op>& ops, int k, int param, int weight, int grad);

  BuildState& b_;
  std::unordered_map<std::int64_t, Forms> forms_;  // node-based: references stay valid
};

// ---- build_layer_ops.cpp ----

// What a program gives a layer's forward and backward ops, operand by operand: a phase
// loads, stores and makes tensors per repeat; a pipeline stage picks from what it
// allocated for the step. The ops themselves are made once, below, from the kind.
class OperandSource {
 public:
  virtual ~OperandSource() = default;
  virtual int input(int k) = 0;                            // x_k, layer k's input
  virtual int output(int k) = 0;                           // x_{k+1}, its output
  virtual int saved(int k, int index, bool backward) = 0;  // saved tensor `index`
  virtual int output_grad(int k) = 0;                      // dy
  virtual int input_grad(int k) = 0;                       // dx
  virtual int param(int k, int param) = 0;                 // the full parameter
  virtual int grad(int k, int param) = 0;                  // its gradient accumulator
};

// Layer k's forward op: saved tensors only in training and where the kind keeps them.
Op forward_op(const BuildState& b, int k, OperandSource& source);
// Whether layer k's backward runs: it has parameters to train or an input gradient to give.
bool runs_backward(const BuildState& b, int k);
// Layer k's backward op: dx (and what only dx needs) when a layer before it trains.
Op backward_op(const BuildState& b, int k, OperandSource& source);
// The parameters layer k's forward reads, and those its backward reads.
std::vector<int> forward_params(const BuildState& b, int k);
std::vector<int> backward_params(const BuildState& b, int k);

// The loss after the last layer: labels from the host, the loss and the logits'
// gradient, the loss to the host.
struct LossTensors {
  int logits = -1, labels = -1, loss = -1, dlogits = -1;
};
void add_loss(BuildState& b, std::vector<Op>& ops, const LossTensors& t);

// ---- build_schedule.cpp ----

// The phases of a standard or phased plan (a pipelined plan's are its stages): each a
// list of items, and its name.
struct Schedule {
  std::vector<std::vector<Item>> phases;
  std::vector<std::string> names;
};
Schedule plan_phases(const BuildState& b);

// ---- build_phase.cpp ----

// Where a value passed between phases goes: a row of a batch-serial buffer.
struct Slot {
  int buffer = -1;
  std::int64_t row = -1;
};
// The values that cross a phase boundary and their buffers: x_{k+1} (layer k's output),
// its gradient, and each saved tensor of a layer whose backward runs in another phase.
struct Boundaries {
  std::vector<int> fwd_phase, bwd_phase;  // per layer
  std::vector<Slot> x, dx;                // per layer k: its output, the output's gradient
  std::vector<std::vector<Slot>> saved;   // per layer, per saved tensor
};
Boundaries place_boundaries(BuildState& b, const Schedule& schedule);

// Builds phase programs one after the other.
class PhaseProgram final : public OperandSource {
 public:
  PhaseProgram(BuildState& b, const Boundaries& at) : b_(b), at_(at), forms_(b) {}

  // A phase of these items. `defer_optimizer`: the gradients stay on device for
  // optimizer_phase (standard mode's off-chip optimizer).
  void build(const std::string& name, const std::vector<Item>& items, bool defer_optimizer);
  // The deferred gradients' reduction and optimizer steps, each state loaded and stored.
  void optimizer_phase(const std::string& name);

  int input(int k) override;
  int output(int k) override;
  int saved(int k, int index, bool backward) override;
  int output_grad(int k) override;
  int input_grad(int k) override;
  int param(int k, int param) override { return forms_.full(k, param); }
  int grad(int k, int param) override;

 private:
  using Grads = std::vector<std::pair<int, std::vector<int>>>;  // layer, a gradient per parameter
  // A tied parameter's gradient, accumulated by its layer's backward, waiting to be added
  // to its owner's before the owner's update: on device, or (a later phase updates the
  // owner) in its remote buffer.
  struct Contribution {
    int tensor = -1;
    int buffer = -1;
  };
  void begin(const std::vector<Item>& items);
  void forward(int k);
  void backward(int k);
  // A tensor the repeat body uses, allocated before the loop and freed after it.
  int repeat_tensor(const std::string& name, TensorClass cls, const Shape& shape);
  // A value of an earlier phase, loaded from its slot into such a tensor each step.
  int load(const Slot& s, const std::string& name, const Shape& shape);
  // io_overlapped: every tensor the loop streams gets a second slot.
  void double_buffer();
  // The updates of these gradients: a tied parameter's waits for its owner's; an owner's
  // adds what waits for it, then ParamForms::update.
  void update_all(std::vector<Op>& ops, const Grads& grads);
  void add_contributions(std::vector<Op>& ops, int k, int param, int grad);
  // At a phase's end: what still waits goes to its remote buffer.
  void store_contributions(std::vector<Op>& ops);

  BuildState& b_;
  const Boundaries& at_;
  ParamForms forms_;
  // The phase being built: before, inside and after the repeat loop.
  std::vector<Op> pre_, body_, post_;
  std::vector<int> repeat_tensors_;
  // Values on device inside the loop: x_[k] is layer k's input (x_[0] the images),
  // dx_[k] its gradient, saved_ a layer's saved tensors; maps, not vectors of n + 1: a
  // phase touches a few layers (2n phases in a phased plan).
  std::unordered_map<int, int> x_, dx_;
  std::unordered_map<std::int64_t, int> saved_;
  std::vector<int> new_grads_;  // the backward being made
  Grads grads_, deferred_grads_;
  // By owner (layer, parameter); kept from phase to phase.
  std::map<std::pair<int, int>, std::vector<Contribution>> waiting_;
};

// ---- build_stage.cpp ----

// Pipelined plans (docs/pipelining.md): the layers' stages, then each stage's program.
void place_stages(BuildState& b);
void build_stages(BuildState& b);

// ---- build_preload.cpp ----

// execution.io_schedule: preload: the remote weights a phase loads before its compute
// loop are loaded during the phase before instead.
void preload_next_phase_loads(BuildState& b);

}  // namespace popkit::planner::build
