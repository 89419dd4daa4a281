// Adam (popxl-addons semantics) for float32 and float16 first moments.
#include "engine/tensor/adam.h"

#include <cmath>

namespace popkit::engine {

AdamParams AdamParams::from(const config::Optimizer& o) {
  const config::Attributes& a = o.attributes;  // config/optimizer_kinds.h: adam's keys
  const double beta1 = a.number("beta1"), beta2 = a.number("beta2");
  AdamParams p;
  p.lr = static_cast<float>(o.lr);
  p.beta1 = static_cast<float>(beta1);
  p.beta2 = static_cast<float>(beta2);
  p.eps = static_cast<float>(a.number("eps"));
  p.weight_decay = static_cast<float>(o.weight_decay);
  p.bias_correction = a.boolean("bias_correction");
  p.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  p.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  p.beta1_exact = beta1;
  p.beta2_exact = beta2;
  return p;
}

}  // namespace popkit::engine
