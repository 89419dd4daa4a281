// Adam (popxl-addons semantics) for float32 and float16 first moments.
#include "engine/tensor/adam.h"

#include <cmath>

namespace popkit::engine {

AdamParams AdamParams::from(const config::Optimizer& o) {
  AdamParams p;
  p.lr = static_cast<float>(o.lr);
  p.beta1 = static_cast<float>(o.beta1);
  p.beta2 = static_cast<float>(o.beta2);
  p.eps = static_cast<float>(o.eps);
  p.weight_decay = static_cast<float>(o.weight_decay);
  p.bias_correction = o.bias_correction;
  p.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  p.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  p.beta1_exact = o.beta1;
  p.beta2_exact = o.beta2;
  return p;
}

}  // namespace popkit::engine
