// Names of the plan's enums, as they appear in printouts and plan files.
#include "planner/plan.h"

#include <array>
#include <utility>

#include "planner/names.h"

namespace popkit::planner {
namespace {

template <typename E, std::size_t N>
using Table = std::array<std::pair<E, std::string_view>, N>;

constexpr Table<TensorClass, 5> kTensorClasses{{
    {TensorClass::kWeights, "weights"},
    {TensorClass::kGradAccumulators, "gradient_accumulators"},
    {TensorClass::kOptimizerState, "optimizer_state"},
    {TensorClass::kActivations, "activations"},
    {TensorClass::kIoSlots, "io_slots"},
}};
constexpr Table<OpKind, 16> kOpKinds{{
    {OpKind::kAlloc, "alloc"},
    {OpKind::kFree, "free"},
    {OpKind::kZero, "zero"},
    {OpKind::kRemoteLoad, "remote_load"},
    {OpKind::kRemoteStore, "remote_store"},
    {OpKind::kHostLoad, "host_load"},
    {OpKind::kHostStore, "host_store"},
    {OpKind::kAllGather, "all_gather"},
    {OpKind::kReduceScatter, "reduce_scatter"},
    {OpKind::kAllReduce, "all_reduce"},
    {OpKind::kSliceShard, "slice_shard"},
    {OpKind::kForward, "forward"},
    {OpKind::kLoss, "loss"},
    {OpKind::kBackward, "backward"},
    {OpKind::kOptimizerStep, "optimizer_step"},
    {OpKind::kRepeat, "repeat"},
}};
constexpr Table<DType, 2> kDTypes{{{DType::kFloat32, "float32"}, {DType::kFloat16, "float16"}}};
constexpr Table<Activation, 3> kActivations{
    {{Activation::kNone, "none"}, {Activation::kGelu, "gelu"}, {Activation::kRelu, "relu"}}};
constexpr Table<IoMode, 3> kIoModes{
    {{IoMode::kCompute, "compute"}, {IoMode::kIo, "io"}, {IoMode::kIoOverlapped, "io_overlapped"}}};
constexpr Table<config::ExecutionMode, 2> kModes{
    {{config::ExecutionMode::kPhased, "phased"}, {config::ExecutionMode::kStandard, "standard"}}};
constexpr Table<VariableRole, 3> kRoles{{{VariableRole::kWeight, "weight"},
                                         {VariableRole::kBias, "bias"},
                                         {VariableRole::kOptimizerState, "optimizer_state"}}};
constexpr Table<Stream, 4> kStreams{{{Stream::kImages, "images"},
                                     {Stream::kLabels, "labels"},
                                     {Stream::kLoss, "loss"},
                                     {Stream::kLogits, "logits"}}};
constexpr Table<Program, 2> kPrograms{{{Program::kTrain, "train"}, {Program::kEval, "eval"}}};
constexpr Table<ReduceOp, 2> kReduceOps{{{ReduceOp::kMean, "mean"}, {ReduceOp::kSum, "sum"}}};
constexpr Table<RetrievalMode, 2> kRetrievalModes{{{RetrievalMode::kOnePerGroup, "one_per_group"},
                                                   {RetrievalMode::kAllReplicas, "all_replicas"}}};
constexpr Table<config::OptimizerType, 2> kOptimizerTypes{
    {{config::OptimizerType::kAdam, "adam"}, {config::OptimizerType::kSgd, "sgd"}}};

constexpr Table<config::LayerType, 2> kLayerTypes{
    {{config::LayerType::kLinear, "linear"}, {config::LayerType::kDropout, "dropout"}}};

template <typename E, std::size_t N>
std::string_view name_in(const Table<E, N>& table, E value) {
  for (const auto& [e, name] : table)
    if (e == value) return name;
  return "?";
}

template <typename E>
constexpr const auto& table_of() {
  if constexpr (std::is_same_v<E, TensorClass>)
    return kTensorClasses;
  else if constexpr (std::is_same_v<E, OpKind>)
    return kOpKinds;
  else if constexpr (std::is_same_v<E, DType>)
    return kDTypes;
  else if constexpr (std::is_same_v<E, Activation>)
    return kActivations;
  else if constexpr (std::is_same_v<E, IoMode>)
    return kIoModes;
  else if constexpr (std::is_same_v<E, config::ExecutionMode>)
    return kModes;
  else if constexpr (std::is_same_v<E, VariableRole>)
    return kRoles;
  else if constexpr (std::is_same_v<E, Stream>)
    return kStreams;
  else if constexpr (std::is_same_v<E, ReduceOp>)
    return kReduceOps;
  else if constexpr (std::is_same_v<E, RetrievalMode>)
    return kRetrievalModes;
  else if constexpr (std::is_same_v<E, config::LayerType>)
    return kLayerTypes;
  else if constexpr (std::is_same_v<E, Program>)
    return kPrograms;
  else {
    static_assert(std::is_same_v<E, config::OptimizerType>, "no name table for this enum");
    return kOptimizerTypes;
  }
}

}  // namespace

std::string_view tensor_class_name(TensorClass c) {
  return name_in(kTensorClasses, c);
}
std::string_view op_kind_name(OpKind k) {
  return name_in(kOpKinds, k);
}
std::string_view dtype_name(DType t) {
  return name_in(kDTypes, t);
}
std::string_view activation_name(Activation a) {
  return name_in(kActivations, a);
}
std::string_view io_mode_name(IoMode m) {
  return name_in(kIoModes, m);
}
std::string_view execution_mode_name(config::ExecutionMode m) {
  return name_in(kModes, m);
}
std::string_view retrieval_mode_name(RetrievalMode m) {
  return name_in(kRetrievalModes, m);
}

template <typename E>
std::string_view enum_name(E value) {
  return name_in(table_of<E>(), value);
}

template <typename E>
std::vector<std::string_view> enum_names() {
  std::vector<std::string_view> out;
  for (const auto& [e, name] : table_of<E>()) out.push_back(name);
  return out;
}

template <typename E>
std::optional<E> parse_enum(std::string_view name) {
  for (const auto& [e, n] : table_of<E>())
    if (n == name) return e;
  return std::nullopt;
}

#define POPKIT_ENUM(E)                                    \
  template std::string_view enum_name<E>(E value);        \
  template std::vector<std::string_view> enum_names<E>(); \
  template std::optional<E> parse_enum<E>(std::string_view name);
POPKIT_ENUM(TensorClass)
POPKIT_ENUM(OpKind)
POPKIT_ENUM(DType)
POPKIT_ENUM(Activation)
POPKIT_ENUM(IoMode)
POPKIT_ENUM(config::ExecutionMode)
POPKIT_ENUM(VariableRole)
POPKIT_ENUM(Stream)
POPKIT_ENUM(ReduceOp)
POPKIT_ENUM(RetrievalMode)
POPKIT_ENUM(config::OptimizerType)
POPKIT_ENUM(config::LayerType)
POPKIT_ENUM(Program)
#undef POPKIT_ENUM

}  // namespace popkit::planner
