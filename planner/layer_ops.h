// What generic code asks of a layer through its kind's entry (planner/layer_kinds.h): an
// op's operand by role, the shape each operand must have (the engine's plan checks and
// the plan reader), whether a layer is what its kind allows, and its parameters' sizes
// (the cost model, the tuner). None of it names a kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/layer_kinds.h"

namespace popkit::planner {

// The tensor in the position of `role` (and `index`) of a forward or backward op of a
// layer of `kind`, or -1 (absent from the op, or unused).
int layer_operand(const Op& op, const LayerKind& kind, OperandRole role, int index = 0);

// Whether the kind's backward reads the layer's input (a pipeline stage then stashes it).
bool backward_reads_input(const LayerKind& kind);

// The element counts of the layer's parameters, in the kind's order (none without).
std::vector<std::int64_t> parameter_elements(const LayerInfo& layer);

// The elements of a layer's gradient accumulators: the sum over its parameters.
std::uint64_t accumulator_elements(const LayerInfo& layer);

// What one position of a forward or backward op of layer `layer` must hold on `rows`
// micro-batch rows: the shape its kernels use, what messages call it ("the weight", "the
// pre-activation"), and whether the position may be -1.
struct OperandNeed {
  int tensor = -1;
  Shape shape;
  std::string what;
  bool required = true;
};
// Every position of the op, inputs, then outputs, then state. Required: the input, the
// output, dy, the parameters and their gradients; dx and what only dx needs both or
// neither; a saved tensor in a backward when the layer keeps it.
std::vector<OperandNeed> operand_needs(const Op& op, const LayerInfo& layer, std::int64_t rows);

// What is wrong with a layer as a plan holds it, or "": a kind with an entry, the kind's
// keys with their types and rules (config/layer_kinds.h), and the output width the kind
// gives its input width.
std::string layer_error(const LayerInfo& layer);

}  // namespace popkit::planner
