// Adam (popxl-addons semantics) for float32 and float16 first moments.
#include "engine/tensor/adam.h"

#include <cmath>

namespace popkit::engine {
namespace {

float to_float(float x) {
  return x;
}
float to_float(Eigen::half x) {
  return static_cast<float>(x);
}
template <typename M>
M from_float(float x) {
  return static_cast<M>(x);
}

template <typename M>
void adam_impl(float* w, const float* g, M* m, float* v, std::int64_t n, std::int64_t t,
               const AdamParams& p) {
  // 1 - b^t in double, rounded once: the correction is a per-step scalar.
  const float c1 = p.bias_correction
                       ? static_cast<float>(1.0 - std::pow(p.beta1_exact, static_cast<double>(t)))
                       : 1.0f;
  const float c2 = p.bias_correction
                       ? static_cast<float>(1.0 - std::pow(p.beta2_exact, static_cast<double>(t)))
                       : 1.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const M m_new = from_float<M>(p.beta1 * to_float(m[i]) + p.one_minus_beta1 * gi);
    m[i] = m_new;
    const float v_new = p.beta2 * v[i] + p.one_minus_beta2 * (gi * gi);
    v[i] = v_new;
    float m_hat = to_float(m_new);
    float v_hat = v_new;
    if (p.bias_correction) {
      m_hat /= c1;
      v_hat /= c2;
    }
    const float u = m_hat / (std::sqrt(v_hat) + p.eps) + p.weight_decay * w[i];
    w[i] -= p.lr * u;
  }
}

}  // namespace

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

void adam_step(float* w, const float* g, float* m, float* v, std::int64_t n, std::int64_t t,
               const AdamParams& p) {
  adam_impl(w, g, m, v, n, t, p);
}

void adam_step(float* w, const float* g, Eigen::half* m, float* v, std::int64_t n, std::int64_t t,
               const AdamParams& p) {
  adam_impl(w, g, m, v, n, t, p);
}

}  // namespace popkit::engine
