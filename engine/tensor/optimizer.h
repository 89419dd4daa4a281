// The engine's half of an optimizer kind: the step of the plan's optimizer on one
// variable (a full tensor or its shard), given the weight, its reduced gradient and
// the optimizer's state tensors in the order planner/optimizer_kinds.h lists them.
// Each kind is one entry of the table in optimizer.cpp (its step), with its loop in its
// own kernel table (engine/kernels/adam.h, sgd.h); its state's dtypes are the planner's
// entry's, which the engine's plan checks hold the plan to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "config/config.h"

namespace popkit::engine {

struct Kernels;

class OptimizerKernel {
 public:
  explicit OptimizerKernel(const config::Optimizer& optimizer);

  // One step on n elements with the kernels of `level`; `t` counts optimizer steps from 1.
  // Every kind steps element by element (an element's new weight and state depend on
  // that element alone), so the engine may step a tensor in any cut of its elements
  // (planner/element_blocks.h) and get the same bits.
  void step(const Kernels& level, float* w, const float* g, std::span<std::byte* const> state,
            std::span<const config::DType> dtypes, std::int64_t n, std::int64_t t) const;

  struct Kind;  // one optimizer kind's entry (optimizer.cpp)

 private:
  config::Optimizer optimizer_;
  const Kind* kind_;
};

}  // namespace popkit::engine
