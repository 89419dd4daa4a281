// Adam as popxl-addons applies it, on one variable (a full tensor or its shard),
// elementwise so a shard's update equals the same elements of the full update:
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2        (t incremented before use)
//   with bias correction:  m^ = m / (1 - b1^t),  v^ = v / (1 - b2^t)
//   u = m^ / (sqrt(v^) + eps) + wd w;   w -= lr u
// The first moment may be stored as float16 (`first_order_dtype`); the update then
// uses the stored, rounded value, as the next op reading the variable would.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "config/config.h"

namespace popkit::engine {

struct AdamParams {
  float lr = 1.0e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1.0e-5f;
  float weight_decay = 0.0f;
  bool bias_correction = false;
  // (1 - b1) and (1 - b2) rounded once from double, not recomputed in float.
  float one_minus_beta1 = 0.1f;
  float one_minus_beta2 = 0.001f;
  // The betas as configured, for the bias corrections 1 - b^t.
  double beta1_exact = 0.9;
  double beta2_exact = 0.999;

  static AdamParams from(const config::Optimizer& o);
};

// adam_step, the update itself, is in adam_step.h (compiled per x86-64 level by
// engine/kernels).

}  // namespace popkit::engine
