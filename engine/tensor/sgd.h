// SGD as torch.optim.SGD applies it (dampening 0), on one variable (a full tensor or its
// shard), elementwise so a shard's update equals the same elements of the full update:
//   g = g + wd w                                   (when weight_decay != 0)
//   b = mu b + g                                   (when momentum != 0; b starts at 0,
//                                                   so the first step gives b = g, as torch)
//   g = g + mu b  (nesterov)  or  g = b            (when momentum != 0)
//   w = w - lr g
#pragma once

#include <cstdint>

#include "config/config.h"

namespace popkit::engine {

struct SgdParams {
  float lr = 1.0e-3f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;

  // config/optimizer_kinds.h: sgd's keys.
  static SgdParams from(const config::Optimizer& o) {
    return {static_cast<float>(o.lr), static_cast<float>(o.attributes.number("momentum")),
            static_cast<float>(o.weight_decay), o.attributes.boolean("nesterov")};
  }
};

// The loop, header-only so that each x86-64 level's kernels (engine/kernels) carry their
// own copy. `b` is the momentum buffer, null when momentum == 0.
inline void sgd_step(float* w, const float* g, float* b, std::int64_t n, const SgdParams& p) {
  const float mu = p.momentum;
  const float wd = p.weight_decay;
  const float lr = p.lr;
  if (b == nullptr) {
    for (std::int64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + wd * w[i]);
    return;
  }
  if (p.nesterov) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * w[i];
      b[i] = mu * b[i] + d;
      w[i] -= lr * (d + mu * b[i]);
    }
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    b[i] = mu * b[i] + (g[i] + wd * w[i]);
    w[i] -= lr * b[i];
  }
}

}  // namespace popkit::engine
