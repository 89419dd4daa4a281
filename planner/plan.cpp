// Names of the plan's enums, as they appear in printouts and plan files.
#include "planner/names.h"

namespace popkit::planner {
namespace {

constexpr NameArray<TensorClass, 6> kTensorClasses{{
    {TensorClass::kWeights, "weights"},
    {TensorClass::kGradAccumulators, "gradient_accumulators"},
    {TensorClass::kOptimizerState, "optimizer_state"},
    {TensorClass::kActivations, "activations"},
    {TensorClass::kIoSlots, "io_slots"},
    {TensorClass::kWorkspace, "workspace"},
}};
constexpr NameArray<OpKind, 19> kOpKinds{{
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
    {OpKind::kSend, "send"},
    {OpKind::kRecv, "recv"},
    {OpKind::kAdd, "add"},
}};
constexpr NameArray<VariableRole, 3> kRoles{{{VariableRole::kWeight, "weight"},
                                             {VariableRole::kBias, "bias"},
                                             {VariableRole::kOptimizerState, "optimizer_state"}}};
constexpr NameArray<InitKind, 3> kInitKinds{
    {{InitKind::kZeros, "zeros"}, {InitKind::kOnes, "ones"}, {InitKind::kNormal, "normal"}}};
constexpr NameArray<Stream, 4> kStreams{{{Stream::kImages, "images"},
                                         {Stream::kLabels, "labels"},
                                         {Stream::kLoss, "loss"},
                                         {Stream::kLogits, "logits"}}};
constexpr NameArray<Program, 2> kPrograms{{{Program::kTrain, "train"}, {Program::kEval, "eval"}}};
constexpr NameArray<ReduceOp, 2> kReduceOps{{{ReduceOp::kMean, "mean"}, {ReduceOp::kSum, "sum"}}};

}  // namespace

NameTable<TensorClass> name_table(TensorClass) {
  return kTensorClasses;
}
NameTable<OpKind> name_table(OpKind) {
  return kOpKinds;
}
NameTable<VariableRole> name_table(VariableRole) {
  return kRoles;
}
NameTable<InitKind> name_table(InitKind) {
  return kInitKinds;
}
NameTable<Stream> name_table(Stream) {
  return kStreams;
}
NameTable<Program> name_table(Program) {
  return kPrograms;
}
NameTable<ReduceOp> name_table(ReduceOp) {
  return kReduceOps;
}

std::string_view tensor_class_name(TensorClass c) {
  return enum_name(c);
}
std::string_view op_kind_name(OpKind k) {
  return enum_name(k);
}

}  // namespace popkit::planner
