// The engine's half of an optimizer kind: the step of the plan's optimizer on one
// variable (a full tensor or its shard), given the weight, its reduced gradient and
// the optimizer's state tensors in the order planner/optimizer_kinds.h lists them.
// Adding an optimizer kind adds a case here and its loop to the kernel table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "config/config.h"
#include "engine/tensor/adam.h"
#include "engine/tensor/sgd.h"

namespace popkit::engine {

struct Kernels;

class OptimizerKernel {
 public:
  explicit OptimizerKernel(const config::Optimizer& optimizer);

  // The dtype the plan must give state tensor `i` (the first moment may be float16).
  [[nodiscard]] bool accepts(std::size_t i, config::DType dtype) const;

  // One step on n elements; `t` counts optimizer steps from 1.
  void step(const Kernels& k, float* w, const float* g, std::span<std::byte* const> state,
            std::span<const config::DType> dtypes, std::int64_t n, std::int64_t t) const;

 private:
  config::OptimizerType type_;
  AdamParams adam_;
  SgdParams sgd_;
};

}  // namespace popkit::engine
