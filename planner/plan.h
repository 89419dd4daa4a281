// The Plan: the program that `poprun` interprets (DESIGN.md, "The plan is the
// program"). The planner builds it from a validated Config; the engine executes its
// ops in order and allocates exactly the device tensors it lists, so the memory the
// planner computes per phase is the memory the engine measures, to the byte.
//
// A plan is the same for every replica: device tensors, buffers and ops are described
// once and hold per replica, and groupings are three numbers, so its size grows with
// the model, never with the replication factor.
//
// Execution: `setup` runs once (it allocates the always-live tensors); then, for every
// optimizer step, `phases` run in order. Inside a phase, a kRepeat op runs its body
// `steps` times (the gradient-accumulation loop, batch serialisation); the repeat step
// s = 0..steps-1 selects the micro-batch and the batch-serial buffer entries.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "planner/pipeline.h"
#include "planner/replica_grouping.h"

namespace popkit::planner {

using config::Activation;
using config::DType;
using config::IoMode;
using config::RetrievalMode;

[[nodiscard]] constexpr std::int64_t dtype_size(DType t) {
  return t == DType::kFloat16 ? 2 : 4;
}

// The classes of the memory breakdown (PopVision's and the vocabulary).
enum class TensorClass {
  kWeights,           // weights and biases, full or shard
  kGradAccumulators,  // gradient accumulators and reduced gradients
  kOptimizerState,    // Adam first and second moments
  kActivations,       // values computed per micro-batch and kept for backward
  kIoSlots,           // tensors that receive host or remote streams inside a repeat loop
  kWorkspace,         // the kernels' scratch (GEMM packing), live around the op that uses it
};
inline constexpr std::size_t kNumTensorClasses = 6;
using ClassBytes = std::array<std::uint64_t, kNumTensorClasses>;  // indexed by TensorClass

// A tensor on the device of every replica. Ops name device tensors by index.
struct DeviceTensor {
  std::string name;  // e.g. "fc1.weight", "inner.weight", "fc1.weight.grad", "x.in"
  TensorClass cls = TensorClass::kActivations;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;  // on-device shape: the meta shape, or {shard_size} for a shard
  std::int64_t nelms = 0;
  std::uint64_t nbytes = 0;  // nelms * dtype_size
  bool always_live = false;  // allocated by `setup`, never freed
  // io_overlapped: the second slot of a double-buffered tensor. Ops name the first
  // slot; at odd repeat steps the engine uses `double_buffer` instead.
  int double_buffer = -1;
  // A pipelined plan: the stage whose device holds the tensor (-1 otherwise).
  int stage = -1;

  bool operator==(const DeviceTensor&) const = default;
};

// A remote buffer in streaming memory, per replica (PopXL remote_buffer).
// Batch-serial buffers are rows x steps entries: entry = row * steps + step.
// Other buffers have steps == 1 and one entry per row.
struct RemoteBuffer {
  std::string name;  // e.g. "fc1.weight", "inner.weight", "x", "dx"
  TensorClass cls = TensorClass::kWeights;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> element_shape;  // the shard shape {shard_size} when sharded
  std::int64_t rows = 1;
  std::int64_t steps = 1;
  std::uint64_t entry_bytes = 0;
  [[nodiscard]] std::int64_t entries() const { return rows * steps; }
  // entry = row * steps + step  (batch-serial buffer layout)
  [[nodiscard]] std::int64_t flat_index(std::int64_t row, std::int64_t step) const {
    return row * steps + step;
  }
  [[nodiscard]] std::uint64_t nbytes() const {
    return entry_bytes * static_cast<std::uint64_t>(entries());
  }

  bool operator==(const RemoteBuffer&) const = default;
};

// A model layer as the planner places it and the engine computes it: its kind (a name of
// planner/layer_kinds.h, config/layer_kinds.h and engine/layer_kinds.h) with its kind's
// keys, and the width of a sample's input and output (elements; a sequence's T x C).
// Identical layers (same kind, input width and attributes) share one graph and its
// buffers, one row or entry each.
struct LayerInfo {
  std::string name;
  std::string kind = "linear";
  config::Attributes attributes;  // the kind's keys, as the config gives them
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  // The positions of a sample of its output: a sequence's T, 1 for a sample that is not a
  // sequence (a linear layer flattens its input's); width / sequence features each. A
  // kind that changes the positions (embedding, linear) does not read its input's, so
  // its input has these positions for every kind whose rules read them.
  std::int64_t sequence = 1;
  int graph = 0;
  int row = 0;

  bool operator==(const LayerInfo&) const = default;
};

// What a variable is to its layer: a parameter (a weight or a bias, as its kind declares:
// planner/layer_kinds.h) or the optimizer's state for one (Adam's moments, SGD's momentum
// buffer; the optimizer kind names them).
enum class VariableRole { kWeight, kBias, kOptimizerState };

// A variable's initial value, the same for every group and replica, whatever the plan's
// replication, mode or sharding: zeros, ones, or normal(mean, std) keyed by the
// variable's name and the plan's init_seed (engine/tensor/init.h).
enum class InitKind { kZeros, kOnes, kNormal };
struct VariableInit {
  InitKind kind = InitKind::kZeros;
  double mean = 0.0;  // kNormal
  double std = 0.0;   // kNormal

  bool operator==(const VariableInit&) const = default;
};

// A named value that lives across optimizer steps: a weight, a bias, or a piece of the
// optimizer's state. Its home is a device tensor (always live) or a remote buffer entry.
// This is what initialisation writes, what checkpoints save by name, and what retrieval
// reads.
struct Variable {
  std::string name;  // "fc1.weight", "fc1.bias", "fc1.weight.adam_m", "fc1.weight.momentum"
  int layer = 0;
  VariableRole role = VariableRole::kWeight;
  TensorClass cls = TensorClass::kWeights;
  DType dtype = DType::kFloat32;
  VariableInit init;                     // what Engine::initialize writes
  std::vector<std::int64_t> meta_shape;  // the full shape
  std::int64_t nelms = 0;
  // RTS: sharded when nelms >= threshold and its class is sharded. A shard is flat,
  // shard_size = ceil(nelms / S) elements over the S members of the sharding group;
  // replica of rank k holds elements [k * shard_size, (k+1) * shard_size), and the
  // last ranks' tails (padding = S * shard_size - nelms elements in all) are zero.
  bool sharded = false;
  std::int64_t shard_size = 0;  // == nelms when not sharded
  std::int64_t padding = 0;
  bool remote = false;  // home is a remote buffer entry, else the device tensor below
  int device_tensor = -1;
  int buffer = -1;
  std::int64_t entry = -1;

  bool operator==(const Variable&) const = default;
};

// kLogits: an evaluation plan streams the last layer's output to the host, which scores
// the valid rows of each micro-batch (a partial last micro-batch is padded).
enum class Stream { kImages, kLabels, kLoss, kLogits };

// What a plan computes. kTrain: an optimizer step per execution of its phases. kEval:
// forward only, with the weights and biases as training keeps them (same homes, same
// sharding) and no optimizer state or gradients; an execution of its phases evaluates
// one batch of micro_batch_size x gradient_accumulation samples per replica.
enum class Program { kTrain, kEval };
enum class ReduceOp { kMean, kSum };

enum class OpKind {
  kAlloc,          // tensor: allocate (adds nbytes to the replica's live bytes)
  kFree,           // tensor: release
  kZero,           // tensor = 0
  kRemoteLoad,     // buffer[entry] -> tensor (tensor.nbytes == buffer.entry_bytes)
  kRemoteStore,    // tensor -> buffer[entry]
  kHostLoad,       // stream (images | labels) micro-batch of this replica and step -> tensor
  kHostStore,      // tensor -> stream (loss)
  kAllGather,      // src shard -> dst full (meta shape), within `grouping` (the sharding group)
  kReduceScatter,  // src full -> dst shard: reduce over `grouping`, keep the slice of this
                   //   replica's rank in `shard_grouping`
  kAllReduce,      // tensor reduced in place over `grouping`
  kSliceShard,     // src full -> dst shard: this replica's own slice, padded with zeros
  kForward,        // layer: in, its parameters -> out, what it saves for its backward
  kLoss,           // logits, labels -> loss (1 element), dlogits (mean over the micro-batch)
  kBackward,       // layer: dy and what it needs -> dx (when >= 0); accumulates its gradients
  kOptimizerStep,  // the optimizer on one variable: weight, grad, state (full or shard)
  kRepeat,         // body runs `steps` times; io_mode says how its streams move
  kSend,           // pipelined: src (this stage's) -> dst, a receive buffer of stage `peer`
  kRecv,           // pipelined: waits for stage `peer`'s send into src, copies src -> dst
  kAdd,            // sum += addend (a tied parameter's gradient into its owner's)
};

// What each op computes, per replica r (the contract between planner and engine). The
// operands are named as in planner/operands.h, which gives their positions.
//  kHostLoad images: tensor [mb, prod(input_shape)] float32, the micro-batch of replica
//    r at repeat step s, normalised (x - mean) / std. labels: [mb] float32 class ids.
//  kHostStore loss: the host records the loss of (r, s). logits: [mb, n_classes], the
//    host scores them (evaluation).
//  kForward, kBackward: what the layer's kind computes (engine/layer_kinds.cpp), on the
//    operands its kind declares (planner/layer_kinds.h). Every kind's forward reads the
//    layer's input [rows, in_features] and writes its output [rows, out_features]; a
//    saved tensor is -1 where the layer keeps none (an evaluation plan keeps nothing for
//    a backward). Every kind's backward reads dy [rows, out_features] and writes dx
//    [rows, in_features] when dx >= 0; a gradient accumulator of parameter p becomes
//    s/(s+1) * acc + g_p/(s+1), g_p the micro-batch's gradient (popxl-addons' running
//    mean; at s = 0 the backward writes it whole), s the enclosing repeat's step (0
//    outside a repeat). linear: pre = in * W + b (W [in, out], b [out]), out = act(pre)
//    (act(in * W + b) when pre is -1); backward dz = dy * act'(pre) in place in dy (which
//    is why dy is state), grad_weight from in^T dz, grad_bias from dz's column sums, dx =
//    dz W^T. dropout: out = in * mask / (1 - rate), dx = dy * mask / (1 - rate).
//  kLoss: loss[0] = mean over the micro-batch's rows and positions of
//    -log softmax(logits[row, position])[label[row, position]] (P = plan.positions, each
//    position n_classes logits); dlogits = (softmax(logits) - onehot(label)) / (mb P).
//    dlogits may be the logits tensor itself (a training plan's loss overwrites them).
//  kAllReduce: tensor = mean (or sum) over the members of r's group in `grouping`,
//    added in replica order.
//  kReduceScatter: dst = slice k of (mean or sum over r's group in `grouping` of src),
//    k = rank of r in `shard_grouping`; slice k is elements [k*n, (k+1)*n) of the flat
//    tensor, n = dst.nelms, zero past the end.
//  kAllGather: dst (flat) = the shards of r's group in `grouping`, in rank order,
//    truncated to dst.nelms.
//  kSliceShard: dst = slice (rank of r in `grouping`) of src, zero past the end.
//  kOptimizerStep: the plan's optimizer (planner/optimizer_kinds.h) on weight, with grad
//    and the optimizer's state tensors, all of equal nelms; the step counter t is per
//    optimizer step, incremented before use.
//  kAdd: sum += addend, element by element, both float32 of equal nelms. A tied
//    parameter's layer accumulates its gradient in its own accumulator; before the
//    owner's update the builder adds it to the owner's (which is why the sum is the same
//    in every mode: the gradients of a step are added in one place, in one order).
//  kSend: dst (on stage `peer` of the same replica) = src; the send waits until the
//    receiver has taken the buffer's previous contents. kRecv: waits for the matching
//    send, then dst = src (its own receive buffer), which frees the buffer for the next;
//    with dst == src (a tied weight's copy, a tied gradient) it only waits. Each ordered
//    pair of stages has one such hand-over, its sends and receives in the same order.
//  In a pipelined stage program the micro-batch (what a repeat step s selects elsewhere)
//  is the enclosing slot's (Phase::slots).
//  Sums in collectives always run in replica order, so results never depend on timing.

// One op: a kind, its operand tensors and its attributes. Operands are device tensor
// indices by position (planner/operands.h names the positions of each kind); a position
// the op does not use holds -1. inputs are read, outputs written, state read and
// updated in place. Attributes a kind does not use keep their defaults.
struct Op {
  OpKind kind = OpKind::kAlloc;
  std::string label;  // for printouts, e.g. "load x row 0"

  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<int> state;
  // The kernels' scratch (planner/workspace.h): a kWorkspace tensor the op may overwrite
  // freely, allocated just before the op (before the repeat that holds it) and freed just
  // after; -1 when the op's kernels need none.
  int workspace = -1;

  // Attributes.
  int layer = -1;     // kForward kBackward kOptimizerStep
  int variable = -1;  // kOptimizerStep: the weight's Variable index
  // Remote ops. entry >= 0: that entry. entry < 0: batch-serial, entry = row * steps + s.
  int buffer = -1;
  std::int64_t entry = -1;
  std::int64_t row = -1;
  // execution.io_schedule: preload. The op (an alloc or remote_load of the next phase's
  // weights) was moved from the start of the next phase into this one, so the load can
  // overlap this phase's compute; the engine may run the load on its IO thread, and
  // waits for it before the next phase.
  bool preload = false;
  int peer = -1;                    // kSend kRecv: the other stage
  Stream stream = Stream::kImages;  // host ops
  // Collectives.
  ReplicaGrouping grouping;
  ReplicaGrouping shard_grouping;  // kReduceScatter
  ReduceOp reduce = ReduceOp::kMean;
  // kRepeat.
  std::int64_t steps = 0;
  IoMode io_mode = IoMode::kCompute;
  std::vector<Op> body;

  // Cost, per replica, for one execution of the op (a repeat: its body times steps).
  std::uint64_t flops = 0;
  std::uint64_t host_bytes = 0;
  std::uint64_t remote_bytes = 0;
  // Sent + received by the direct algorithms of engine/runtime/collectives.h, the mean
  // over the group's members rounded down (members of a group whose size does not
  // divide the tensor move a chunk more or less than the mean).
  std::uint64_t collective_bytes = 0;
  std::uint64_t pipeline_bytes = 0;  // kSend: to another stage

  bool operator==(const Op&) const = default;
};

// Memory per replica in one phase. Live bytes are sampled at the phase's start and
// after every op (inside a repeat, after every op of one iteration; repeats never
// allocate). `peak` is the largest sample; `always_live` the bytes of always-live
// tensors; `not_always_live` = peak - always_live; `peak_by_class` the live bytes by
// class at the first sample that reaches the peak.
struct PhaseMemory {
  std::uint64_t peak = 0;
  std::uint64_t always_live = 0;
  std::uint64_t not_always_live = 0;
  ClassBytes peak_by_class{};

  bool operator==(const PhaseMemory&) const = default;
};

// A pipelined stage program's unit of work: the forward or the backward of the stage's
// layers on one micro-batch, ops [first_op, end_op) of the phase.
struct StageSlot {
  PipelineWork work = PipelineWork::kForward;
  std::int64_t micro_batch = 0;
  std::int64_t first_op = 0;
  std::int64_t end_op = 0;

  bool operator==(const StageSlot&) const = default;
};

struct Phase {
  std::string name;  // e.g. "fc1 forward", "fc4 forward+loss+backward+optimizer"
  std::vector<Op> ops;
  PhaseMemory memory;
  double estimated_seconds = 0.0;
  // A pipelined plan: each phase is one stage's whole program for a step, on a device of
  // its own; its ops before the first slot prepare the step, those after the last reduce
  // the gradients over the replicas and update (after the flush: no stale weights).
  int stage = -1;
  std::vector<StageSlot> slots;  // in the stage's 1F1B order

  bool operator==(const Phase&) const = default;
};

// Pipelined execution (pipeline.stages > 1; docs/pipelining.md). Devices: replica r's
// stage s is device r * stages + s.
struct PipelineStagePlan {
  int first_layer = 0;
  int n_layers = 0;
  std::int64_t stash_depth = 0;   // micro-batches whose activations the stage keeps
  double head_seconds = 0.0;      // estimated: before the first slot
  double forward_seconds = 0.0;   // one forward slot
  double backward_seconds = 0.0;  // one backward slot
  double tail_seconds = 0.0;      // after the last slot

  bool operator==(const PipelineStagePlan&) const = default;
};
struct PipelinePlan {
  bool placement_auto = true;  // auto: balanced by forward + backward FLOPs
  std::vector<PipelineStagePlan> stages;
  double planned_bubble = 0.0;    // (S - 1) / (GA + S - 1), equal stage times
  double estimated_bubble = 0.0;  // of the 1F1B schedule timed with the stages' estimates

  bool operator==(const PipelinePlan&) const = default;
};

// A change that makes a plan that does not fit fit, found by planning it
// (planner/fit_advice.h); or, when no candidate fits, the least peak of those planned.
struct FitAdvice {
  bool fits = false;
  std::vector<std::string> settings;  // `--set` arguments: the changes to the config
  std::uint64_t peak_bytes = 0;       // of that candidate, per replica
  double samples_per_second = 0.0;    // its estimate
  std::size_t n_planned = 0;          // candidates planned
  std::string found;                  // how it was chosen, for text

  bool operator==(const FitAdvice&) const = default;
};

// Why a plan does not fit, and what would help.
struct NotFitting {
  std::string phase;
  std::uint64_t bytes_over = 0;
  std::vector<std::string> largest;      // "fc1.weight.grad (1.5 MiB)", largest first
  std::vector<std::string> suggestions;  // "lower sharding.threshold", ...
  std::optional<FitAdvice> advice;       // when the tuner was asked (popplan plan does)

  bool operator==(const NotFitting&) const = default;
};

// The host memory `poprun` needs to run the plan on a CPU, all replicas together
// (planner/host_memory.h says how each part is counted). Bytes.
struct HostMemory {
  std::uint64_t datasets = 0;      // train and test images and labels, with the largest copy
  std::uint64_t streaming = 0;     // the remote buffers of every replica
  std::uint64_t device = 0;        // the device tensors of every replica
  std::uint64_t host_buffers = 0;  // global batch, sample order, evaluation, checkpoints
  std::uint64_t overhead = 0;      // the process itself: code, libraries, threads, allocator
  bool datasets_counted = true;    // false: read from files at run time, not in `datasets`
  [[nodiscard]] std::uint64_t total() const;  // the sum, saturated at 2^64 - 1

  bool operator==(const HostMemory&) const = default;
};

// The collectives' traffic between hosts, per optimizer step (an evaluation plan: per
// evaluation batch), when the plan was priced with a network profile
// (planner/device_profile.h; `popplan plan --replicas-per-host`). Bytes are those the
// direct algorithms of engine/runtime/collectives.h send between replicas.
struct NetworkEstimate {
  std::int64_t replicas_per_host = 1;
  std::int64_t n_hosts = 1;
  double bytes_per_second = 0.0;  // each host's link, each way
  double latency_seconds = 0.0;   // per message across hosts
  // Per replica, sent + received, the mean over all replicas rounded down; the two add up
  // to the collectives' collective_bytes (to a byte of rounding).
  std::uint64_t on_host_bytes = 0;
  std::uint64_t cross_host_bytes = 0;
  std::uint64_t network_bytes = 0;       // all hosts together: every byte that crosses, once
  std::uint64_t busiest_link_bytes = 0;  // the busiest host's link, busier direction, summed
                                         //   over the collectives
  std::uint64_t messages = 0;  // cross-host messages of the replica that sends most, summed
                               //   over the collectives
  double seconds = 0.0;        // what the network adds to estimated_step_seconds

  bool operator==(const NetworkEstimate&) const = default;
};

struct Plan {
  int version = 6;  // of the plan file format (planner/plan_read.cpp)
  std::string name;
  Program program = Program::kTrain;
  std::int64_t replication_factor = 1;
  std::int64_t micro_batch_size = 1;
  std::int64_t gradient_accumulation = 1;
  std::int64_t global_batch_size = 1;  // micro_batch * accumulation * replicas
  std::vector<std::int64_t> input_shape;
  std::int64_t n_classes = 0;  // the loss's classes at each position
  // Predictions a sample: a language model predicts the next token at each of its T
  // positions (labels [mb, T], logits [mb, T x n_classes]); a classifier one (labels [mb]).
  std::int64_t positions = 1;
  config::ExecutionMode mode = config::ExecutionMode::kStandard;
  IoMode io_mode = IoMode::kCompute;
  std::int64_t io_tiles = 0;           // execution.io_tiles, for the cost model
  ReplicaGrouping variables_grouping;  // one value per group
  RetrievalMode retrieval_mode = RetrievalMode::kOnePerGroup;
  ReplicaGrouping sharding_grouping;
  std::int64_t sharding_threshold = 0;  // 0 = sharding off
  config::Optimizer optimizer;
  // training.seed: with the optimizer step, a sample's index in the global batch and the
  // layer, the key of a dropout mask (PopXL's seed input, fresh for every step).
  std::uint64_t seed = 42;
  std::uint64_t init_seed = 42;  // model.init.seed: the key of the variables' normal values

  std::vector<LayerInfo> layers;
  std::vector<Variable> variables;
  std::vector<DeviceTensor> tensors;
  std::vector<RemoteBuffer> buffers;
  std::vector<Op> setup;
  std::vector<Phase> phases;
  std::optional<PipelinePlan> pipeline;
  config::SyncPattern sync_pattern = config::SyncPattern::kFull;

  // Per replica, for the whole program.
  std::uint64_t peak_bytes = 0;
  int peak_phase = 0;
  std::uint64_t always_live_bytes = 0;
  std::uint64_t streaming_bytes = 0;      // all remote buffers
  std::uint64_t host_bytes_per_step = 0;  // host <-> device per optimizer step
  std::uint64_t memory_per_replica = 0;   // the device's
  bool fits = true;
  NotFitting not_fitting;  // when !fits

  std::string device_profile;
  // "cpu" when the profile is a CPU's (config::DeviceProfile::is_cpu: `poprun calibrate`'s,
  // or the built-in cpu), so the estimates compare with what poprun measures; else "ipu".
  std::string device_kind = "ipu";
  // The CPU profile's core_round_trip_seconds (config/device_profile.h): where the machine
  // had put its CPUs when measured. 0: not a CPU's, or not measured.
  double device_core_round_trip_seconds = 0.0;
  // The CPU profile's cache_probe_seconds: how much of the last-level cache the host left
  // its threads when measured. 0: not a CPU's, or not measured.
  double device_cache_probe_seconds = 0.0;
  double estimated_step_seconds = 0.0;
  double estimated_samples_per_second = 0.0;
  // Set when the plan was priced with a network profile; the estimates above then
  // include the network. Absent: every replica on one host.
  std::optional<NetworkEstimate> network;

  HostMemory host_memory;  // for poprun on this CPU

  // What the planner changed or doubts, e.g. io_overlapped falling back to io.
  std::vector<std::string> warnings;

  bool operator==(const Plan&) const = default;
};

}  // namespace popkit::planner
