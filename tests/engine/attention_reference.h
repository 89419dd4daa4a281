// Causal multi-head self-attention in double, written from its definition (no blocks,
// no GEMM), for the tests of engine/tensor/attention.h: the values, and beside each
// output a first-order bound of the float kernel's rounding error, built from the float
// bounds of tests/support/kernel_check.h (u = 2^-24) step by step:
//   scores     s = scale q.k:  (HS + 1) u scale sum|q k| + 2 u |s|   (GEMM, scaling)
//   P row t:   relative eps_t = 2 (2 max_j ds_j + u max_j |a_j|) + (t + 3) u + 8 u,
//              a_j = s_j - max s (two perturbed scores per a_j, exp within 4 u, the sum
//              of t + 1 terms, the division)
//   O[t]       = sum_j P v:  (eps_t + (T + 1) u) sum_j P |v|
// and the backward's likewise (dP by its GEMM, the row dot D, dS = scale P (dP - D),
// then the three GEMMs); see attention_backward_reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/tensor/attention.h"
#include "engine/tensor/dropout.h"
#include "tests/support/kernel_check.h"

namespace popkit::test {

struct AttentionReference {
  std::vector<double> probs, probs_tol;  // [B, NH, T, T]
  std::vector<double> out, out_tol;      // [B T, C]
};

struct AttentionGradReference {
  std::vector<double> dqkv, dqkv_tol;  // [B T, 3 C]
};

// What the reference shares between forward and backward: the shape's indexing and the
// dropout mask's scale of element (t, j) of pair (b, h) (0 or 1 / (1 - rate)).
struct AttentionIndex {
  planner::AttentionShape s;
  engine::AttentionDropout dropout;

  [[nodiscard]] std::int64_t T() const { return s.seq; }
  [[nodiscard]] std::int64_t HS() const { return s.head_size(); }
  // qkv element i of q (part 0), k (1) or v (2) of row t in pair (b, h).
  [[nodiscard]] std::int64_t qkv(std::int64_t b, std::int64_t h, int part, std::int64_t t,
                                 std::int64_t i) const {
    return (b * s.seq + t) * 3 * s.channels + part * s.channels + h * HS() + i;
  }
  [[nodiscard]] std::int64_t out(std::int64_t b, std::int64_t h, std::int64_t t,
                                 std::int64_t i) const {
    return (b * s.seq + t) * s.channels + h * HS() + i;
  }
  [[nodiscard]] std::int64_t prob(std::int64_t b, std::int64_t h, std::int64_t t,
                                  std::int64_t j) const {
    return ((b * s.heads + h) * s.seq + t) * s.seq + j;
  }
  [[nodiscard]] double mask(std::int64_t b, std::int64_t h, std::int64_t t, std::int64_t j) const {
    if (dropout.rate == 0.0) return 1.0;
    const bool keep = engine::dropout_keeps(dropout.sample_keys[b], (h * T() + t) * T() + j,
                                            engine::dropout_threshold(dropout.rate));
    return keep ? 1.0 / (1.0 - dropout.rate) : 0.0;
  }
  [[nodiscard]] double scale() const { return 1.0 / std::sqrt(static_cast<double>(HS())); }
};

// P for pair (b, h) with its per-row relative bound eps (size T). The inputs may be float
// (the kernel's) or double (for finite differences).
template <typename In>
void reference_probs(const AttentionIndex& x, const In* qkv, std::int64_t b, std::int64_t h,
                     std::vector<double>& p, std::vector<double>& eps) {
  const std::int64_t T = x.T(), HS = x.HS();
  p.assign(static_cast<std::size_t>(T * T), 0.0);
  eps.assign(static_cast<std::size_t>(T), 0.0);
  std::vector<double> s(static_cast<std::size_t>(T)), ds(s.size());
  for (std::int64_t t = 0; t < T; ++t) {
    double max = -HUGE_VAL, max_ds = 0.0;
    for (std::int64_t j = 0; j <= t; ++j) {
      double dot = 0.0, mag = 0.0;
      for (std::int64_t i = 0; i < HS; ++i) {
        const double term = double(qkv[x.qkv(b, h, 0, t, i)]) * qkv[x.qkv(b, h, 1, j, i)];
        dot += term;
        mag += std::abs(term);
      }
      s[j] = dot * x.scale();
      ds[j] = static_cast<double>(HS + 1) * kU * mag * x.scale() + 2 * kU * std::abs(s[j]);
      max = std::max(max, s[j]);
      max_ds = std::max(max_ds, ds[j]);
    }
    double sum = 0.0, max_a = 0.0;
    for (std::int64_t j = 0; j <= t; ++j) {
      p[t * T + j] = std::exp(s[j] - max);
      sum += p[t * T + j];
      max_a = std::max(max_a, std::abs(s[j] - max));
    }
    for (std::int64_t j = 0; j <= t; ++j) p[t * T + j] /= sum;
    eps[t] = 2 * (2 * max_ds + kU * max_a) + static_cast<double>(t + 3) * kU + 8 * kU;
  }
}

template <typename In>
AttentionReference attention_forward_reference(const AttentionIndex& x, const In* qkv) {
  const std::int64_t B = x.s.batch, NH = x.s.heads, T = x.T(), HS = x.HS();
  AttentionReference r;
  r.probs.assign(static_cast<std::size_t>(B * NH * T * T), 0.0);
  r.probs_tol = r.probs;
  r.out.assign(static_cast<std::size_t>(B * T * x.s.channels), 0.0);
  r.out_tol = r.out;
  std::vector<double> p, eps;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      reference_probs(x, qkv, b, h, p, eps);
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t j = 0; j < T; ++j) {
          r.probs[x.prob(b, h, t, j)] = p[t * T + j];
          r.probs_tol[x.prob(b, h, t, j)] = eps[t] * p[t * T + j];
        }
        for (std::int64_t i = 0; i < HS; ++i) {
          double o = 0.0, mag = 0.0;
          for (std::int64_t j = 0; j <= t; ++j) {
            const double pd = p[t * T + j] * x.mask(b, h, t, j);
            o += pd * qkv[x.qkv(b, h, 2, j, i)];
            mag += pd * std::abs(double(qkv[x.qkv(b, h, 2, j, i)]));
          }
          r.out[x.out(b, h, t, i)] = o;
          r.out_tol[x.out(b, h, t, i)] = (eps[t] + 2 * kU + static_cast<double>(T + 1) * kU) * mag;
        }
      }
    }
  return r;
}

// From dO: dPd = dO v (GEMM, (HS + 1) u), dP = mask dPd (u), D = sum_j P dP, dS = scale
// P (dP - D), then dQ = dS k, dK = dS^T q, dV = (mask P)^T dO, each a sum of at most T
// terms. eP = eps_t P bounds P's error; e(dS) = scale P ((eps_t + 4 u) |dP - D| + e(dP)
// + e(D)) with e(D) = sum_j (eps_t + u) P |dP| + P e(dP) + (t + 2) u P |dP|.
template <typename In>
AttentionGradReference attention_backward_reference(const AttentionIndex& x, const In* qkv,
                                                    const In* dout) {
  const std::int64_t B = x.s.batch, NH = x.s.heads, T = x.T(), HS = x.HS();
  const auto n = static_cast<std::size_t>(T * T);
  AttentionGradReference g;
  g.dqkv.assign(static_cast<std::size_t>(B * T * 3 * x.s.channels), 0.0);
  g.dqkv_tol = g.dqkv;
  std::vector<double> p, eps, dp(n), edp(n), ds(n), eds(n);
  const double sum_u = static_cast<double>(T + 1) * kU;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      reference_probs(x, qkv, b, h, p, eps);
      for (std::int64_t t = 0; t < T; ++t) {
        double dot = 0.0, e_dot = 0.0, dot_mag = 0.0;
        for (std::int64_t j = 0; j <= t; ++j) {
          double d = 0.0, mag = 0.0;
          for (std::int64_t i = 0; i < HS; ++i) {
            const double term = double(dout[x.out(b, h, t, i)]) * qkv[x.qkv(b, h, 2, j, i)];
            d += term;
            mag += std::abs(term);
          }
          const double m = x.mask(b, h, t, j);
          dp[t * T + j] = m * d;
          edp[t * T + j] = m * (static_cast<double>(HS + 1) * kU * mag + kU * std::abs(d));
          const double pj = p[t * T + j];
          dot += pj * dp[t * T + j];
          e_dot += (eps[t] + kU) * pj * std::abs(dp[t * T + j]) + pj * edp[t * T + j];
          dot_mag += pj * std::abs(dp[t * T + j]);
        }
        e_dot += static_cast<double>(t + 2) * kU * dot_mag;
        for (std::int64_t j = 0; j <= t; ++j) {
          const double pj = p[t * T + j], diff = dp[t * T + j] - dot;
          ds[t * T + j] = x.scale() * pj * diff;
          eds[t * T + j] =
              x.scale() * pj * ((eps[t] + 4 * kU) * std::abs(diff) + edp[t * T + j] + e_dot);
        }
      }
      for (std::int64_t i = 0; i < HS; ++i) {
        for (std::int64_t t = 0; t < T; ++t) {  // dQ[t] = sum_j dS[t, j] k[j]
          double v = 0.0, e = 0.0, mag = 0.0;
          for (std::int64_t j = 0; j <= t; ++j) {
            const double kj = qkv[x.qkv(b, h, 1, j, i)];
            v += ds[t * T + j] * kj;
            e += eds[t * T + j] * std::abs(kj);
            mag += std::abs(ds[t * T + j] * kj);
          }
          g.dqkv[x.qkv(b, h, 0, t, i)] = v;
          g.dqkv_tol[x.qkv(b, h, 0, t, i)] = e + sum_u * mag;
        }
        for (std::int64_t j = 0; j < T; ++j) {  // dK[j] = sum_t dS[t, j] q[t]; dV likewise
          double vk = 0.0, ek = 0.0, mk = 0.0, vv = 0.0, ev = 0.0, mv = 0.0;
          for (std::int64_t t = j; t < T; ++t) {
            const double qt = qkv[x.qkv(b, h, 0, t, i)], dot = dout[x.out(b, h, t, i)];
            vk += ds[t * T + j] * qt;
            ek += eds[t * T + j] * std::abs(qt);
            mk += std::abs(ds[t * T + j] * qt);
            const double pd = p[t * T + j] * x.mask(b, h, t, j);
            vv += pd * dot;
            ev += (eps[t] + 2 * kU) * pd * std::abs(dot);
            mv += pd * std::abs(dot);
          }
          g.dqkv[x.qkv(b, h, 1, j, i)] = vk;
          g.dqkv_tol[x.qkv(b, h, 1, j, i)] = ek + sum_u * mk;
          g.dqkv[x.qkv(b, h, 2, j, i)] = vv;
          g.dqkv_tol[x.qkv(b, h, 2, j, i)] = ev + sum_u * mv;
        }
      }
    }
  return g;
}

}  // namespace popkit::test
