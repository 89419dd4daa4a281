// GPT-2's pre-LN decoder block in double, written from its definition (one sample at a
// time, plain loops), for the engine's decoder_block entry to be checked against:
//   a = ln1(x); qkv = a Wqkv + bqkv; o = attention(qkv); h = x + drop(o Wproj + bproj)
//   m = ln2(h); f = gelu(m Wfc + bfc); y = h + drop(f Wfc2 + bfc2)
// and its backward, derived by hand (the test checks it against finite differences).
// Masks are given as multipliers (0 or 1 / (1 - rate)), as the engine's rule draws them.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace popkit::test {

using Vec = std::vector<double>;

struct BlockDims {
  std::int64_t T, C, NH, H;
  [[nodiscard]] std::int64_t hs() const { return C / NH; }
};

// The parameters in the kind's order (planner/decoder_block_layout.h's Param).
using BlockParams = std::array<Vec, 12>;
enum { kS1, kB1, kWqkv, kBqkv, kWp, kBp, kS2, kB2, kWfc, kBfc, kWfc2, kBfc2 };

// One sample's masks: the probabilities' [NH, T, T], the residuals' [T, C] each.
struct BlockMasks {
  Vec att, res1, res2;
};

// What the forward keeps, one sample.
struct BlockTrace {
  Vec mean1, rstd1, a, qkv, probs, o, h, mean2, rstd2, m, pre, f, y;
};

inline std::size_t ix(std::int64_t i) {
  return static_cast<std::size_t>(i);
}

inline void ref_layer_norm(const Vec& x, const Vec& scale, const Vec& shift, double eps,
                           std::int64_t rows, std::int64_t C, Vec& out, Vec& mean, Vec& rstd) {
  out.assign(ix(rows * C), 0.0);
  mean.assign(ix(rows), 0.0);
  rstd.assign(ix(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (std::int64_t c = 0; c < C; ++c) mu += x[ix(r * C + c)];
    mu /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) var += std::pow(x[ix(r * C + c)] - mu, 2);
    const double rs = 1.0 / std::sqrt(var / static_cast<double>(C) + eps);
    mean[ix(r)] = mu;
    rstd[ix(r)] = rs;
    for (std::int64_t c = 0; c < C; ++c)
      out[ix(r * C + c)] = (x[ix(r * C + c)] - mu) * rs * scale[ix(c)] + shift[ix(c)];
  }
}

// out[rows, n_out] = x[rows, in] W[in, n_out] + b
inline Vec ref_linear(const Vec& x, const Vec& w, const Vec& b, std::int64_t rows, std::int64_t in,
                      std::int64_t n_out) {
  Vec out(ix(rows * n_out));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n_out; ++j) {
      double s = b[ix(j)];
      for (std::int64_t k = 0; k < in; ++k) s += x[ix(r * in + k)] * w[ix(k * n_out + j)];
      out[ix(r * n_out + j)] = s;
    }
  return out;
}

inline constexpr double kGeluC = 0.7978845608028654, kGeluK = 0.044715;
inline double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(kGeluC * (x + kGeluK * x * x * x)));
}
inline double gelu_grad(double x) {
  const double t = std::tanh(kGeluC * (x + kGeluK * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * kGeluK * x * x);
}

inline BlockTrace ref_block_forward(const BlockDims& d, const BlockParams& p, const BlockMasks& mk,
                                    const Vec& x, double eps) {
  const std::int64_t T = d.T, C = d.C, HS = d.hs();
  BlockTrace tr;
  ref_layer_norm(x, p[kS1], p[kB1], eps, T, C, tr.a, tr.mean1, tr.rstd1);
  tr.qkv = ref_linear(tr.a, p[kWqkv], p[kBqkv], T, C, 3 * C);
  tr.probs.assign(ix(d.NH * T * T), 0.0);
  tr.o.assign(ix(T * C), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  for (std::int64_t h = 0; h < d.NH; ++h)
    for (std::int64_t t = 0; t < T; ++t) {
      double* P = &tr.probs[ix((h * T + t) * T)];
      double most = -1e300, sum = 0;
      for (std::int64_t j = 0; j <= t; ++j) {
        double s = 0;
        for (std::int64_t e = 0; e < HS; ++e)
          s += tr.qkv[ix(t * 3 * C + h * HS + e)] * tr.qkv[ix(j * 3 * C + C + h * HS + e)];
        P[j] = s * scale;
        most = std::max(most, P[j]);
      }
      for (std::int64_t j = 0; j <= t; ++j) sum += (P[j] = std::exp(P[j] - most));
      for (std::int64_t j = 0; j <= t; ++j) P[j] /= sum;
      for (std::int64_t e = 0; e < HS; ++e) {
        double s = 0;
        for (std::int64_t j = 0; j <= t; ++j)
          s += P[j] * mk.att[ix((h * T + t) * T + j)] * tr.qkv[ix(j * 3 * C + 2 * C + h * HS + e)];
        tr.o[ix(t * C + h * HS + e)] = s;
      }
    }
  const Vec y1 = ref_linear(tr.o, p[kWp], p[kBp], T, C, C);
  tr.h.resize(ix(T * C));
  for (std::int64_t i = 0; i < T * C; ++i) tr.h[ix(i)] = x[ix(i)] + mk.res1[ix(i)] * y1[ix(i)];
  ref_layer_norm(tr.h, p[kS2], p[kB2], eps, T, C, tr.m, tr.mean2, tr.rstd2);
  tr.pre = ref_linear(tr.m, p[kWfc], p[kBfc], T, C, d.H);
  tr.f.resize(tr.pre.size());
  for (std::size_t i = 0; i < tr.pre.size(); ++i) tr.f[i] = gelu(tr.pre[i]);
  const Vec y2 = ref_linear(tr.f, p[kWfc2], p[kBfc2], T, d.H, C);
  tr.y.resize(ix(T * C));
  for (std::int64_t i = 0; i < T * C; ++i) tr.y[ix(i)] = tr.h[ix(i)] + mk.res2[ix(i)] * y2[ix(i)];
  return tr;
}

// Adds to gw and gb the linear's gradients from dz; returns dx = dz W^T.
inline Vec ref_linear_back(const Vec& x, const Vec& w, const Vec& dz, std::int64_t rows,
                           std::int64_t in, std::int64_t n_out, Vec& gw, Vec& gb) {
  Vec dx(ix(rows * in), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n_out; ++j) {
      const double g = dz[ix(r * n_out + j)];
      gb[ix(j)] += g;
      for (std::int64_t k = 0; k < in; ++k) {
        gw[ix(k * n_out + j)] += x[ix(r * in + k)] * g;
        dx[ix(r * in + k)] += g * w[ix(k * n_out + j)];
      }
    }
  return dx;
}

// Adds to gs and gb the layer norm's gradients from dy; returns dx.
inline Vec ref_layer_norm_back(const Vec& x, const Vec& scale, const Vec& mean, const Vec& rstd,
                               const Vec& dy, std::int64_t rows, std::int64_t C, Vec& gs, Vec& gb) {
  Vec dx(ix(rows * C));
  for (std::int64_t r = 0; r < rows; ++r) {
    double m1 = 0, m2 = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double xh = (x[ix(r * C + c)] - mean[ix(r)]) * rstd[ix(r)];
      const double g = dy[ix(r * C + c)];
      gs[ix(c)] += g * xh;
      gb[ix(c)] += g;
      m1 += g * scale[ix(c)];
      m2 += g * scale[ix(c)] * xh;
    }
    m1 /= static_cast<double>(C);
    m2 /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) {
      const double xh = (x[ix(r * C + c)] - mean[ix(r)]) * rstd[ix(r)];
      dx[ix(r * C + c)] = rstd[ix(r)] * (dy[ix(r * C + c)] * scale[ix(c)] - m1 - xh * m2);
    }
  }
  return dx;
}

// One sample's backward from dy: adds its parameters' gradients to g, returns dx.
inline Vec ref_block_backward(const BlockDims& d, const BlockParams& p, const BlockMasks& mk,
                              const Vec& x, const BlockTrace& tr, const Vec& dy, BlockParams& g) {
  const std::int64_t T = d.T, C = d.C, HS = d.hs();
  Vec dz(ix(T * C));
  for (std::int64_t i = 0; i < T * C; ++i) dz[ix(i)] = mk.res2[ix(i)] * dy[ix(i)];
  Vec df = ref_linear_back(tr.f, p[kWfc2], dz, T, d.H, C, g[kWfc2], g[kBfc2]);
  for (std::size_t i = 0; i < df.size(); ++i) df[i] *= gelu_grad(tr.pre[i]);
  const Vec dm = ref_linear_back(tr.m, p[kWfc], df, T, C, d.H, g[kWfc], g[kBfc]);
  Vec dh = ref_layer_norm_back(tr.h, p[kS2], tr.mean2, tr.rstd2, dm, T, C, g[kS2], g[kB2]);
  for (std::int64_t i = 0; i < T * C; ++i) {
    dh[ix(i)] += dy[ix(i)];
    dz[ix(i)] = mk.res1[ix(i)] * dh[ix(i)];
  }
  const Vec d_o = ref_linear_back(tr.o, p[kWp], dz, T, C, C, g[kWp], g[kBp]);
  Vec dqkv(ix(T * 3 * C), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  const auto q = [&](std::int64_t t, std::int64_t h, std::int64_t e) {
    return ix(t * 3 * C + h * HS + e);
  };
  for (std::int64_t h = 0; h < d.NH; ++h)
    for (std::int64_t t = 0; t < T; ++t) {
      const double* P = &tr.probs[ix((h * T + t) * T)];
      Vec dP(ix(t + 1));
      double dot = 0;
      for (std::int64_t j = 0; j <= t; ++j) {
        const double keep = mk.att[ix((h * T + t) * T + j)];
        double s = 0;
        for (std::int64_t e = 0; e < HS; ++e) {
          s += d_o[ix(t * C + h * HS + e)] * tr.qkv[q(j, h, e) + ix(2 * C)];
          dqkv[q(j, h, e) + ix(2 * C)] += P[j] * keep * d_o[ix(t * C + h * HS + e)];
        }
        dP[ix(j)] = s * keep;
        dot += P[j] * dP[ix(j)];
      }
      for (std::int64_t j = 0; j <= t; ++j) {
        const double ds = P[j] * (dP[ix(j)] - dot) * scale;
        for (std::int64_t e = 0; e < HS; ++e) {
          dqkv[q(t, h, e)] += ds * tr.qkv[q(j, h, e) + ix(C)];
          dqkv[q(j, h, e) + ix(C)] += ds * tr.qkv[q(t, h, e)];
        }
      }
    }
  const Vec da = ref_linear_back(tr.a, p[kWqkv], dqkv, T, C, 3 * C, g[kWqkv], g[kBqkv]);
  Vec dx = ref_layer_norm_back(x, p[kS1], tr.mean1, tr.rstd1, da, T, C, g[kS1], g[kB1]);
  for (std::int64_t i = 0; i < T * C; ++i) dx[ix(i)] += dh[ix(i)];
  return dx;
}

}  // namespace popkit::test
