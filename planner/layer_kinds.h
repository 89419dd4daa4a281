// The planner's layer kinds, one entry each in layer_kinds.cpp (DESIGN.md "Kinds"): what a
// layer of the kind holds and does, declared so that the builder, the operand walk (plan
// files, the memory walk, the engine's checks), the cost model, the tuner and checkpoints
// never name a kind. An entry declares:
//  - its parameters: any number of trained variables, each a name suffix ("fc1.weight"),
//    a role, a dtype, a shape from the layer, and an initialiser. Every parameter is of
//    class weights; the optimizer's state for it is the optimizer kind's
//    (planner/optimizer_kinds.h). Each is sharded, remote and checkpointed like any.
//  - its saved tensors: what a training forward keeps for the backward, each a name, a
//    shape from the layer and the micro-batch's rows (a pre-activation [rows, out], a
//    layer norm's per-row statistics [rows]), and whether a layer keeps it.
//  - its forward and backward ops' operands, list by list (inputs, outputs, state), each
//    one of: the layer's input, output, the output's gradient (dy) or the input's (dx), a
//    parameter, a parameter's gradient accumulator, a saved tensor. The builder fills them
//    from these declarations; the engine's kernels find them by role (planner/layer_ops.h).
//  - the FLOPs, GEMMs and workspace of each op, for the cost model and the memory walk.
// What the kind's ops compute is its engine entry's (engine/layer_kinds.h); its keys and
// rules are the config's (config/layer_kinds.h). A layer's input and output are
// [rows, width] float32 matrices, width the elements of one sample.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "planner/plan.h"
#include "planner/workspace.h"

namespace popkit::planner {

// A GEMM [m, k] x [k, n]: what the cost model prices at a shape-dependent rate.
struct Gemm {
  std::uint64_t m = 0, n = 0, k = 0;
  // Its m rows are a micro-batch's, which the engine may cut in tiles too (a linear's
  // forward and input gradient: planner/workspace.h gemm_tiles).
  bool row_tiles = false;
  [[nodiscard]] std::uint64_t flops() const { return 2 * m * n * k; }
};
// The GEMMs of one op: none, one (a linear's forward), two (its backward: the weight's
// gradient and the input's), or a decoder block's four linears' (eight backward).
inline constexpr std::size_t kMaxOpGemms = 8;
struct OpGemms {
  std::array<Gemm, kMaxOpGemms> gemm{};
  int n_gemms = 0;
  [[nodiscard]] std::uint64_t flops() const {
    std::uint64_t f = 0;
    for (int i = 0; i < n_gemms; ++i) f += gemm[static_cast<std::size_t>(i)].flops();
    return f;
  }
};

// The running mean of a gradient accumulator (popxl-addons' accumulate_mean: acc =
// s/(s+1) acc + g/(s+1)), per element: FLOPs a backward counts for it.
inline constexpr std::uint64_t kRunningMeanFlops = 3;

using Shape = std::vector<std::int64_t>;

// How a parameter starts: model.init.weights' normal; model.init.biases (zeros, or that
// normal); or a constant.
enum class ParamInit { kWeights, kBiases, kZeros, kOnes };

struct ParamSpec {
  constexpr ParamSpec(std::string_view suffix_, VariableRole role_, ParamInit init_, DType dtype_,
                      Shape (*shape_)(const LayerInfo&), std::string_view tie_key_ = {},
                      int tied_param_ = 0)
      : suffix(suffix_),
        role(role_),
        init(init_),
        dtype(dtype_),
        shape(shape_),
        tie_key(tie_key_),
        tied_param(tied_param_) {}

  std::string_view suffix;  // the variable "<layer>.<suffix>", its gradient "<...>.grad"
  VariableRole role = VariableRole::kWeight;  // what it is to the layer: a weight or a bias
  ParamInit init = ParamInit::kWeights;
  DType dtype = DType::kFloat32;
  Shape (*shape)(const LayerInfo& layer);  // its meta shape
  // A key of the kind naming another layer (config/layer_kinds.h's tie_key): when the
  // layer sets it, this parameter is that layer's parameter `tied_param`, one variable of
  // one shape, trained by both layers' gradients (summed) and stored once.
  std::string_view tie_key = {};
  int tied_param = 0;
};

struct SavedSpec {
  std::string_view name;  // the tensor "<layer>.<name>"; its batch-serial buffer's name
  std::string_view what;  // for messages: "the pre-activation"
  Shape (*shape)(const LayerInfo& layer, std::int64_t rows);
  bool (*kept)(
      const LayerInfo& layer);  // a layer of the kind keeps it (linear: with an activation)
};

// What one operand of a layer's op is.
enum class OperandRole {
  kIn,     // the layer's input [rows, in_features]
  kOut,    // its output [rows, out_features]
  kDy,     // the output's gradient
  kDx,     // the input's gradient; -1 when nothing before the layer trains
  kParam,  // parameter `index`, whole (gathered when sharded)
  kGrad,   // the gradient accumulator of parameter `index`
  kSaved,  // saved tensor `index`; -1 when the layer does not keep it, or in evaluation
  kState,  // an optimizer step's state `index`, in planner/optimizer_kinds.h's order
};

struct Operand {
  std::string_view name;  // as printouts and messages name the position: "weight"
  OperandRole role = OperandRole::kIn;
  int index = 0;         // kParam, kGrad: the parameter; kSaved: the saved tensor
  bool with_dx = false;  // a backward's operand only when it computes dx (else -1)
};

struct LayerKind {
  std::string_view type;  // the kind's name (config/layer_kinds.h)
  std::span<const ParamSpec> params;
  std::span<const SavedSpec> saved;
  bool identity_in_eval = false;  // evaluation plans emit no op: its output is its input
  std::span<const Operand> forward_inputs, forward_outputs;
  std::span<const Operand> backward_inputs, backward_outputs, backward_state;
  // FLOPs of one forward or backward op on `rows` samples; dx: the backward computes
  // the input's gradient.
  std::uint64_t (*forward_flops)(const LayerInfo& layer, std::uint64_t rows);
  std::uint64_t (*backward_flops)(const LayerInfo& layer, std::uint64_t rows, bool dx);
  // The GEMMs among those FLOPs (the rest is element-wise work).
  OpGemms (*forward_gemms)(const LayerInfo& layer, std::uint64_t rows);
  OpGemms (*backward_gemms)(const LayerInfo& layer, std::uint64_t rows, bool dx);
  // The kernels' scratch of one forward or backward op on `rows` samples
  // (planner/workspace.h); none for a kind whose kernels need none. `saves`: the forward
  // writes the saved tensors (training), else it keeps nothing (evaluation).
  OpWorkspace (*forward_workspace)(const LayerInfo& layer, std::int64_t rows, bool saves);
  OpWorkspace (*backward_workspace)(const LayerInfo& layer, std::int64_t rows, bool dx);
};

const LayerKind& layer_kind(std::string_view type);
std::span<const LayerKind> layer_kinds();

}  // namespace popkit::planner
