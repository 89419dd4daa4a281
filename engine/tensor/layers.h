// The model's math on row-major matrices: linear layers y = x W + b (W of shape
// in x out, so no GEMM needs a transposed copy), GELU (tanh approximation, as PopXL's
// gelu), ReLU, softmax cross-entropy with the mean over the micro-batch, and their
// backward passes. Templates over the scalar type: the engine runs float, the tests
// check the backward passes against finite differences in double.
//
// Reductions (bias gradients, loss sums) are plain loops in a fixed order, so a result
// depends only on the values and shapes, never on the addresses of the buffers.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "config/config.h"

namespace popkit::engine {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;

// y[n, out] = x[n, in] * w[in, out] + b[out]
template <typename T>
void linear_forward(const T* x, const T* w, const T* b, T* y, std::int64_t n, std::int64_t in,
                    std::int64_t out) {
  MatrixMap<T>(y, n, out).noalias() = ConstMatrixMap<T>(x, n, in) * ConstMatrixMap<T>(w, in, out);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < out; ++j) y[i * out + j] += b[j];
}

// gw[in, out] = x^T dz;  gb[out] = column sums of dz (rows in order);  dx = dz w^T when
// dx is not null.
template <typename T>
void linear_backward(const T* dz, const T* x, const T* w, T* dx, T* gw, T* gb, std::int64_t n,
                     std::int64_t in, std::int64_t out) {
  const ConstMatrixMap<T> dz_m(dz, n, out);
  MatrixMap<T>(gw, in, out).noalias() = ConstMatrixMap<T>(x, n, in).transpose() * dz_m;
  for (std::int64_t j = 0; j < out; ++j) gb[j] = T(0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < out; ++j) gb[j] += dz[i * out + j];
  if (dx != nullptr)
    MatrixMap<T>(dx, n, in).noalias() = dz_m * ConstMatrixMap<T>(w, in, out).transpose();
}

// PopXL gelu (tanh approximation): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluK = 0.044715;

template <typename T>
T gelu(T x) {
  const T t = std::tanh(T(kGeluC) * (x + T(kGeluK) * x * x * x));
  return T(0.5) * x * (T(1) + t);
}

// d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
template <typename T>
T gelu_grad(T x) {
  const T t = std::tanh(T(kGeluC) * (x + T(kGeluK) * x * x * x));
  return T(0.5) * (T(1) + t) +
         T(0.5) * x * (T(1) - t * t) * T(kGeluC) * (T(1) + T(3 * kGeluK) * x * x);
}

template <typename T>
void activation_forward(config::Activation act, const T* pre, T* out, std::int64_t n) {
  switch (act) {
    case config::Activation::kNone:
      if (pre != out) std::copy(pre, pre + n, out);
      return;
    case config::Activation::kGelu:
      for (std::int64_t i = 0; i < n; ++i) out[i] = gelu(pre[i]);
      return;
    case config::Activation::kRelu:
      for (std::int64_t i = 0; i < n; ++i) out[i] = pre[i] > T(0) ? pre[i] : T(0);
      return;
  }
}

// dz = dy * act'(pre), in place in dy.
template <typename T>
void activation_backward(config::Activation act, const T* pre, T* dy, std::int64_t n) {
  switch (act) {
    case config::Activation::kNone:
      return;
    case config::Activation::kGelu:
      for (std::int64_t i = 0; i < n; ++i) dy[i] *= gelu_grad(pre[i]);
      return;
    case config::Activation::kRelu:
      for (std::int64_t i = 0; i < n; ++i) dy[i] = pre[i] > T(0) ? dy[i] : T(0);
      return;
  }
}

// Softmax cross-entropy over rows of logits[n, classes] with class ids in `labels`
// (stored as T, as the host stream delivers them). Returns the mean over the rows of
// -log softmax(logits)[label]; dlogits = (softmax(logits) - onehot(label)) / n.
template <typename T>
T softmax_cross_entropy(const T* logits, const T* labels, T* dlogits, std::int64_t n,
                        std::int64_t classes) {
  T total = T(0);
  for (std::int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * classes;
    T* drow = dlogits + i * classes;
    const auto label = static_cast<std::int64_t>(labels[i]);
    T max = row[0];
    for (std::int64_t j = 1; j < classes; ++j) max = std::max(max, row[j]);
    T sum = T(0);
    for (std::int64_t j = 0; j < classes; ++j) {
      drow[j] = std::exp(row[j] - max);
      sum += drow[j];
    }
    const T log_sum = std::log(sum);
    total += log_sum - (row[label] - max);
    for (std::int64_t j = 0; j < classes; ++j)
      drow[j] = (drow[j] / sum - (j == label ? T(1) : T(0))) / T(n);
  }
  return total / T(n);
}

// The gradient accumulator's running mean over the repeat steps (popxl-addons):
// acc = s/(s+1) * acc + g/(s+1). At s = 0 that is acc = g, written as a copy so a
// freshly allocated (uninitialised) accumulator never leaks into the result.
template <typename T>
void accumulate_running_mean(T* acc, const T* g, std::int64_t n, std::int64_t s) {
  if (s == 0) {
    std::copy(g, g + n, acc);
    return;
  }
  const T a = T(s) / T(s + 1);
  const T c = T(s + 1);
  for (std::int64_t i = 0; i < n; ++i) acc[i] = a * acc[i] + g[i] / c;
}

}  // namespace popkit::engine
