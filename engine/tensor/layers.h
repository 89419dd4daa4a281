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
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "base/error.h"
#include "config/config.h"
#include "planner/workspace.h"

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
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// The array forms evaluate tanh with Eigen's vectorised kernel (a rational
// approximation accurate to a few ulp in float), one pass over the elements; `pre` and
// `out` may be the same buffer.
template <typename T>
void activation_forward(config::Activation act, const T* pre, T* out, std::int64_t n) {
  switch (act) {
    case config::Activation::kNone:
      if (pre != out) std::copy(pre, pre + n, out);
      return;
    case config::Activation::kGelu: {
      const ConstArrayMap<T> x(pre, n);
      ArrayMap<T>(out, n) = T(0.5) * x * (T(1) + (T(kGeluC) * (x + T(kGeluK) * x * x * x)).tanh());
      return;
    }
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
    case config::Activation::kGelu: {
      // In blocks, so tanh is evaluated once per element and its values stay in L1.
      constexpr std::int64_t kBlock = 256;
      Eigen::Array<T, kBlock, 1> t;
      for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const std::int64_t m = std::min(kBlock, n - i0);
        const ConstArrayMap<T> x(pre + i0, m);
        auto tm = t.head(m);
        tm = (T(kGeluC) * (x + T(kGeluK) * x * x * x)).tanh();
        ArrayMap<T>(dy + i0, m) *= T(0.5) * (T(1) + tm) + T(0.5) * x * (T(1) - tm * tm) *
                                                              T(kGeluC) *
                                                              (T(1) + T(3 * kGeluK) * x * x);
      }
      return;
    }
    case config::Activation::kRelu:
      for (std::int64_t i = 0; i < n; ++i) dy[i] = pre[i] > T(0) ? dy[i] : T(0);
      return;
  }
}

// Softmax cross-entropy over rows of logits[n, classes] with class ids in `labels`
// (stored as T, as the host stream delivers them). Returns the mean over the rows of
// -log softmax(logits)[label]; dlogits = (softmax(logits) - onehot(label)) / n. dlogits may
// be logits (row by row, each row read before it is written).
template <typename T>
T softmax_cross_entropy(const T* logits, const T* labels, T* dlogits, std::int64_t n,
                        std::int64_t classes) {
  T total = T(0);
  for (std::int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * classes;
    T* drow = dlogits + i * classes;
    const auto label = static_cast<std::int64_t>(labels[i]);
    const T at_label = row[label];  // read before drow, which may be row, is written
    T max = row[0];
    for (std::int64_t j = 1; j < classes; ++j) max = std::max(max, row[j]);
    T sum = T(0);
    for (std::int64_t j = 0; j < classes; ++j) {
      drow[j] = std::exp(row[j] - max);
      sum += drow[j];
    }
    const T log_sum = std::log(sum);
    total += log_sum - (at_label - max);
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

// ---- column blocks, for the engine's kernels -----------------------------------------
// The engine runs a layer's GEMMs on blocks of output columns [j0, j1) so that one
// replica can use several threads; the blocks are fixed by the shapes (kColumnBlock,
// planner/workspace.h), never by the thread count, so results do not depend on how many
// threads run them.

inline constexpr std::int64_t kColumnBlock = planner::kColumnBlock;

template <typename T>
using StridedMap = Eigen::Map<RowMatrix<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using ConstStridedMap = Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>>;

// ---- small micro-batches ---------------------------------------------------------------
// With n <= 8 rows a general GEMM spends as long packing the weight matrix as
// multiplying; these kernels stream W once, straight from memory, with the n rows held
// in vector registers. Each output element is summed in a fixed order (over k, or over
// the rows r), so results depend on the shapes only.

inline constexpr std::int64_t kSmallRows = planner::kSmallRows;

namespace small {

using Packet = Eigen::internal::packet_traits<float>::type;
inline constexpr int kP = Eigen::internal::packet_traits<float>::size;
// The planner sizes the workspace for the columns these kernels leave to the GEMM at
// every packet width it knows.
static_assert(std::ranges::find(planner::kPacketWidths, std::int64_t{kP}) !=
              std::end(planner::kPacketWidths));

// Rows of W fetched ahead of use by the kernels that walk down W's columns.
inline constexpr std::int64_t kPrefetchRows = 16;

// Packets of output columns that the forward and gradient kernels hold in registers at
// once: N x kBlockPackets accumulators (or dz values), plus one step's operands. AVX-512
// has 32 vector registers, room for 8 x 3 = 24: the third packet cuts the broadcasts of
// x per multiply-add by a third. AVX2 and SSE have 16, already full with 8 x 2.
inline constexpr int kBlockPackets = kP >= 16 ? 3 : 2;

// Calls block.template operator()<NP>(j) over [j0, j1) (a multiple of 2 kP) in blocks of
// NP packets: kBlockPackets at a time, the last two or four packets as pairs. Which block
// a column falls in never changes its result (each element's sum has the same order).
template <typename F>
void in_packet_blocks(std::int64_t j0, std::int64_t j1, F&& block) {
  std::int64_t j = j0;
  if constexpr (kBlockPackets == 3) {
    for (std::int64_t rest = (j1 - j) / kP; rest > 4 || rest == 3; rest -= 3, j += 3 * kP)
      block.template operator()<3>(j);
  }
  for (; j < j1; j += 2 * kP) block.template operator()<2>(j);
}

// y[:, j0:j1] = x W[:, j0:j1] (x [N, in], W [in, out]); j1 - j0 a multiple of 2 kP.
template <int N>
void forward(const float* x, const float* w, float* y, std::int64_t in, std::int64_t out,
             std::int64_t j0, std::int64_t j1) {
  using namespace Eigen::internal;
  in_packet_blocks(j0, j1, [&]<int NP>(std::int64_t j) {
    Packet acc[N][NP];
    for (int r = 0; r < N; ++r)
      for (int p = 0; p < NP; ++p) acc[r][p] = pset1<Packet>(0.0f);
    for (std::int64_t k = 0; k < in; ++k) {
      // W is walked down a column block, a stride of `out` floats: ahead of the hardware
      // prefetcher, which follows sequential lines best.
      __builtin_prefetch(w + (k + kPrefetchRows) * out + j);
      Packet wp[NP];
      for (int p = 0; p < NP; ++p) wp[p] = ploadu<Packet>(w + k * out + j + p * kP);
      for (int r = 0; r < N; ++r) {
        const Packet xv = pset1<Packet>(x[r * in + k]);
        for (int p = 0; p < NP; ++p) acc[r][p] = pmadd(xv, wp[p], acc[r][p]);
      }
    }
    for (int r = 0; r < N; ++r)
      for (int p = 0; p < NP; ++p) pstoreu(y + r * out + j + p * kP, acc[r][p]);
  });
}

// gw[:, j0:j1] = a gw + x^T dz (or x^T dz when first), the sum over the N rows in order.
template <int N>
void grad(const float* dz, const float* x, float* gw, std::int64_t in, std::int64_t out, float a,
          bool first, std::int64_t j0, std::int64_t j1) {
  using namespace Eigen::internal;
  const Packet av = pset1<Packet>(a);
  in_packet_blocks(j0, j1, [&]<int NP>(std::int64_t j) {
    Packet d[N][NP];
    for (int r = 0; r < N; ++r)
      for (int p = 0; p < NP; ++p) d[r][p] = ploadu<Packet>(dz + r * out + j + p * kP);
    for (std::int64_t i = 0; i < in; ++i) {
      __builtin_prefetch(gw + (i + kPrefetchRows) * out + j, 1);  // read, then written
      Packet t[NP];
      const Packet x0 = pset1<Packet>(x[i]);
      for (int p = 0; p < NP; ++p) t[p] = pmul(x0, d[0][p]);
      for (int r = 1; r < N; ++r) {
        const Packet xv = pset1<Packet>(x[r * in + i]);
        for (int p = 0; p < NP; ++p) t[p] = pmadd(xv, d[r][p], t[p]);
      }
      float* g = gw + i * out + j;
      if (!first)
        for (int p = 0; p < NP; ++p) t[p] = padd(pmul(av, ploadu<Packet>(g + p * kP)), t[p]);
      for (int p = 0; p < NP; ++p) pstoreu(g + p * kP, t[p]);
    }
  });
}

// dx[:, i0:i1] = dz W[i0:i1, :]^T, out a multiple of kP; two rows of W at a time.
template <int N>
void dx(const float* dz, const float* w, float* dxp, std::int64_t in, std::int64_t out,
        std::int64_t i0, std::int64_t i1) {
  using namespace Eigen::internal;
  std::int64_t i = i0;
  for (; i + 2 <= i1; i += 2) {
    Packet acc[N][2];
    for (int r = 0; r < N; ++r) acc[r][0] = acc[r][1] = pset1<Packet>(0.0f);
    for (std::int64_t j = 0; j < out; j += kP) {
      const Packet wa = ploadu<Packet>(w + i * out + j);
      const Packet wb = ploadu<Packet>(w + (i + 1) * out + j);
      for (int r = 0; r < N; ++r) {
        const Packet dv = ploadu<Packet>(dz + r * out + j);
        acc[r][0] = pmadd(dv, wa, acc[r][0]);
        acc[r][1] = pmadd(dv, wb, acc[r][1]);
      }
    }
    for (int r = 0; r < N; ++r) {
      dxp[r * in + i] = predux(acc[r][0]);
      dxp[r * in + i + 1] = predux(acc[r][1]);
    }
  }
  for (; i < i1; ++i) {
    Packet acc[N];
    for (int r = 0; r < N; ++r) acc[r] = pset1<Packet>(0.0f);
    for (std::int64_t j = 0; j < out; j += kP) {
      const Packet wa = ploadu<Packet>(w + i * out + j);
      for (int r = 0; r < N; ++r) acc[r] = pmadd(ploadu<Packet>(dz + r * out + j), wa, acc[r]);
    }
    for (int r = 0; r < N; ++r) dxp[r * in + i] = predux(acc[r]);
  }
}

// Calls f.template operator()<N>() for the runtime n in [1, kSmallRows].
template <typename F>
void with_rows(std::int64_t n, F&& f) {
  switch (n) {
    case 1:
      f.template operator()<1>();
      break;
    case 2:
      f.template operator()<2>();
      break;
    case 3:
      f.template operator()<3>();
      break;
    case 4:
      f.template operator()<4>();
      break;
    case 5:
      f.template operator()<5>();
      break;
    case 6:
      f.template operator()<6>();
      break;
    case 7:
      f.template operator()<7>();
      break;
    default:
      f.template operator()<8>();
      break;
  }
}

}  // namespace small

// ---- the GEMM, packing into the op's workspace --------------------------------------
// Eigen's blocked GEMM packs kc x mc blocks of one operand and kc x nc of the other; left
// to itself it puts them on the stack (below 128 KiB) or the heap, outside the memory
// account, with a blocking chosen from the machine's caches. Here the blocking is
// planner::gemm_blocking's, fixed by the shapes, and the blocks live in the workspace
// the plan allocates for the op (planner/workspace.h), which must hold
// planner::gemm_workspace_bytes.

template <typename T>
class WorkspaceBlocking : public Eigen::internal::level3_blocking<T, T> {
 public:
  WorkspaceBlocking(const planner::GemmBlocking& b, T* workspace) {
    this->m_kc = b.kc;
    this->m_mc = b.mc;
    this->m_nc = b.nc;
    const auto a_bytes = static_cast<std::uint64_t>(b.kc * b.mc) * sizeof(T);
    const std::uint64_t b_offset = (a_bytes + planner::kWorkspaceAlign - 1) /
                                   planner::kWorkspaceAlign * planner::kWorkspaceAlign;
    this->m_blockA = workspace;
    this->m_blockB = workspace + b_offset / sizeof(T);
  }
};

// C[rows, cols] = A B, or C += A B when `accumulate`; row-major with leading dimensions
// lda, ldb, ldc. A is [rows, depth], stored as its transpose [depth, rows] when ATrans;
// B is [depth, cols], stored as [cols, depth] when BTrans. Eigen runs it column-major:
// C^T[cols, rows] = B^T A^T, inner size depth.
template <bool ATrans, bool BTrans, typename T>
void gemm(std::int64_t rows, std::int64_t cols, std::int64_t depth, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T* c, std::int64_t ldc, bool accumulate, T* workspace,
          std::uint64_t workspace_bytes) {
  if (rows <= 0 || cols <= 0) return;
  if (!accumulate)
    for (std::int64_t i = 0; i < rows; ++i) std::fill(c + i * ldc, c + i * ldc + cols, T(0));
  if (depth <= 0) return;
  POPKIT_ASSERT(workspace != nullptr &&
                reinterpret_cast<std::uintptr_t>(workspace) % planner::kWorkspaceAlign == 0 &&
                planner::gemm_workspace_bytes(cols, depth, rows, sizeof(T)) <= workspace_bytes);
  WorkspaceBlocking<T> blocking(planner::gemm_blocking(cols, depth, rows), workspace);
  using Eigen::ColMajor;
  using Eigen::RowMajor;
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, BTrans ? RowMajor : ColMajor,
                                                 false, T, ATrans ? RowMajor : ColMajor, false,
                                                 ColMajor, 1>::run(cols, rows, depth, b, ldb, a,
                                                                   lda, c, 1, ldc, T(1), blocking,
                                                                   nullptr);
}

// Columns [j0, j1) of pre = x W + b and out = act(pre) (out may be pre).
template <typename T>
void linear_act_forward_columns(config::Activation act, const T* x, const T* w, const T* b, T* pre,
                                T* out, std::int64_t n, std::int64_t in, std::int64_t n_out,
                                std::int64_t j0, std::int64_t j1, T* workspace,
                                std::uint64_t workspace_bytes) {
  std::int64_t j_small = j0;  // columns [j0, j_small) by the small-batch kernel
  if constexpr (std::is_same_v<T, float>) {
    if (n <= kSmallRows) {
      j_small = j0 + (j1 - j0) / (2 * small::kP) * (2 * small::kP);
      small::with_rows(n, [&]<int N>() { small::forward<N>(x, w, pre, in, n_out, j0, j_small); });
    }
  }
  if (j_small < j1)
    gemm<false, false>(n, j1 - j_small, in, x, in, w + j_small, n_out, pre + j_small, n_out, false,
                       workspace, workspace_bytes);
  const std::int64_t m = j1 - j0;
  for (std::int64_t i = 0; i < n; ++i) {
    T* row = pre + i * n_out + j0;
    for (std::int64_t j = 0; j < m; ++j) row[j] += b[j0 + j];
    if (act != config::Activation::kNone || out != pre)
      activation_forward(act, row, out + i * n_out + j0, m);
  }
}

// The weight and bias gradients of columns [j0, j1), accumulated as the running mean of
// the repeat step s (popxl-addons): acc = s/(s+1) acc + g/(s+1), with g/(s+1) computed
// as x^T (dz/(s+1)) so the GEMM adds straight into the accumulator (no scratch). `dz`
// must already be divided by s+1 for s > 0.
template <typename T>
void linear_grad_columns(const T* dz, const T* x, T* gw, T* gb, std::int64_t n, std::int64_t in,
                         std::int64_t n_out, std::int64_t s, std::int64_t j0, std::int64_t j1,
                         T* workspace, std::uint64_t workspace_bytes) {
  const T a = T(s) / T(s + 1);
  std::int64_t j_small = j0;  // columns [j0, j_small) by the small-batch kernel
  if constexpr (std::is_same_v<T, float>) {
    if (n <= kSmallRows) {
      j_small = j0 + (j1 - j0) / (2 * small::kP) * (2 * small::kP);
      small::with_rows(
          n, [&]<int N>() { small::grad<N>(dz, x, gw, in, n_out, a, s == 0, j0, j_small); });
    }
  }
  if (j_small < j1) {
    const std::int64_t m = j1 - j_small;
    if (s > 0) StridedMap<T>(gw + j_small, in, m, Eigen::OuterStride<>(n_out)) *= a;
    gemm<true, false>(in, m, n, x, in, dz + j_small, n_out, gw + j_small, n_out, s > 0, workspace,
                      workspace_bytes);
  }
  // Column sums in row order, in blocks held in registers; then acc = a acc + sum.
  constexpr std::int64_t kB = 64;
  for (std::int64_t c0 = j0; c0 < j1; c0 += kB) {
    const std::int64_t w = std::min(kB, j1 - c0);
    T sum[kB] = {};
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < w; ++j) sum[j] += dz[i * n_out + c0 + j];
    for (std::int64_t j = 0; j < w; ++j) gb[c0 + j] = s == 0 ? sum[j] : a * gb[c0 + j] + sum[j];
  }
}

// Columns [i0, i1) of dx = dz W^T (dx [n, in]).
template <typename T>
void linear_dx_columns(const T* dz, const T* w, T* dx, std::int64_t n, std::int64_t in,
                       std::int64_t n_out, std::int64_t i0, std::int64_t i1, T* workspace,
                       std::uint64_t workspace_bytes) {
  if constexpr (std::is_same_v<T, float>) {
    if (n <= kSmallRows && n_out % small::kP == 0) {
      small::with_rows(n, [&]<int N>() { small::dx<N>(dz, w, dx, in, n_out, i0, i1); });
      return;
    }
  }
  gemm<false, true>(n, i1 - i0, n_out, dz, n_out, w + i0 * n_out, n_out, dx + i0, in, false,
                    workspace, workspace_bytes);
}

}  // namespace popkit::engine
