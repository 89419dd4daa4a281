// The config's name tables; see names.h.
#include "config/names.h"

namespace popkit::config {
namespace {

constexpr NameArray<Activation, 3> kActivations{
    {{Activation::kNone, "none"}, {Activation::kGelu, "gelu"}, {Activation::kRelu, "relu"}}};
constexpr NameArray<Loss, 1> kLosses{{{Loss::kSoftmaxCrossEntropy, "softmax_cross_entropy"}}};
constexpr NameArray<RetrievalMode, 2> kRetrievalModes{
    {{RetrievalMode::kOnePerGroup, "one_per_group"},
     {RetrievalMode::kAllReplicas, "all_replicas"}}};
constexpr NameArray<ExecutionMode, 2> kModes{
    {{ExecutionMode::kPhased, "phased"}, {ExecutionMode::kStandard, "standard"}}};
constexpr NameArray<IoMode, 3> kIoModes{
    {{IoMode::kCompute, "compute"}, {IoMode::kIo, "io"}, {IoMode::kIoOverlapped, "io_overlapped"}}};
constexpr NameArray<IoSchedule, 2> kIoSchedules{
    {{IoSchedule::kOnDemand, "on_demand"}, {IoSchedule::kPreload, "preload"}}};
constexpr NameArray<SyncPattern, 3> kSyncPatterns{
    {{SyncPattern::kFull, "full"},
     {SyncPattern::kSinglePipeline, "single_pipeline"},
     {SyncPattern::kReplicaAndLadder, "replica_and_ladder"}}};
constexpr NameArray<Pass, 2> kPasses{{{Pass::kForward, "forward"}, {Pass::kBackward, "backward"}}};
constexpr NameArray<DType, 2> kDTypes{{{DType::kFloat32, "float32"}, {DType::kFloat16, "float16"}}};
constexpr NameArray<Dataset, 5> kDatasets{{{Dataset::kMnist, "mnist"},
                                           {Dataset::kFashionMnist, "fashion-mnist"},
                                           {Dataset::kSynthetic, "synthetic"},
                                           {Dataset::kIdx, "idx"},
                                           {Dataset::kText, "text"}}};
constexpr NameArray<bool, 2> kBiasInits{{{true, "zeros"}, {false, "normal"}}};

}  // namespace

NameTable<Activation> name_table(Activation) {
  return kActivations;
}
NameTable<Loss> name_table(Loss) {
  return kLosses;
}
NameTable<RetrievalMode> name_table(RetrievalMode) {
  return kRetrievalModes;
}
NameTable<ExecutionMode> name_table(ExecutionMode) {
  return kModes;
}
NameTable<IoMode> name_table(IoMode) {
  return kIoModes;
}
NameTable<IoSchedule> name_table(IoSchedule) {
  return kIoSchedules;
}
NameTable<Pass> name_table(Pass) {
  return kPasses;
}
NameTable<SyncPattern> name_table(SyncPattern) {
  return kSyncPatterns;
}
NameTable<DType> name_table(DType) {
  return kDTypes;
}
NameTable<Dataset> name_table(Dataset) {
  return kDatasets;
}
NameTable<bool> bias_init_names() {
  return kBiasInits;
}

}  // namespace popkit::config
