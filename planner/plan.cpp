// Names of the plan's enums, as they appear in printouts and plan files.
#include "planner/plan.h"

#include "planner/names.h"

namespace popkit::planner {

std::string_view tensor_class_name(TensorClass c) {
  switch (c) {
    case TensorClass::kWeights: return "weights";
    case TensorClass::kGradAccumulators: return "gradient_accumulators";
    case TensorClass::kOptimizerState: return "optimizer_state";
    case TensorClass::kActivations: return "activations";
    case TensorClass::kIoSlots: return "io_slots";
  }
  return "?";
}

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kAlloc: return "alloc";
    case OpKind::kFree: return "free";
    case OpKind::kZero: return "zero";
    case OpKind::kRemoteLoad: return "remote_load";
    case OpKind::kRemoteStore: return "remote_store";
    case OpKind::kHostLoad: return "host_load";
    case OpKind::kHostStore: return "host_store";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kSliceShard: return "slice_shard";
    case OpKind::kForward: return "forward";
    case OpKind::kLoss: return "loss";
    case OpKind::kBackward: return "backward";
    case OpKind::kOptimizerStep: return "optimizer_step";
    case OpKind::kRepeat: return "repeat";
  }
  return "?";
}

}  // namespace popkit::planner
