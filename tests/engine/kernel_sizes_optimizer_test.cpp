// The optimizer kernels (Adam with a float32 or float16 first moment, SGD) of every level
// this CPU runs against a naive reference in double, at 1, 7, 17 and 513 elements (one;
// less than a packet; a packet and one; past Adam's 512-element blocks), Adam also at 8
// (one F16C conversion) and 1037. Tolerances: tests/support/kernel_check.h.
#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "engine/kernels/adam.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/sgd.h"
#include "engine/tensor/adam.h"
#include "engine/tensor/sgd.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using namespace popkit::test;

namespace {

// The nearest float16 value, ties to even (binary16: 10 fraction bits, exponents from
// -14, subnormals 2^-24 apart), of a double, rounded once.
double round_to_half(double v) {
  if (v == 0) return v;
  int e = 0;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  const int spacing = std::max(e - 1, -14) - 10;
  return std::ldexp(std::nearbyint(std::ldexp(v, -spacing)), spacing);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_sizes)

// Adam (adam.h) with the parameters as the struct holds them, in double. m and v are
// sums of two products (3 and 4 roundings of their magnitudes); w = w0 - lr u, with u =
// m^ / (sqrt(v^) + eps) + wd w0 about a dozen roundings from m, v and the corrections:
// 16 u of |w0| + lr |u|'s magnitude. With a float16 first moment, m is the float16
// rounding of that float value: the reference value rounded, or its neighbour when the
// float's own error reaches a tie; the update must use the stored, rounded m.
BOOST_AUTO_TEST_CASE(adam_float32_and_float16_first_moment) {
  struct Case {
    double lr, wd;
    bool bias_correction;
    std::int64_t t;
  };
  for (const Case cs : {Case{0.1, 0.1, true, 3}, Case{0.001, 0.0, false, 1}}) {
    popkit::config::Optimizer o;
    o.lr = cs.lr;
    o.weight_decay = cs.wd;
    o.attributes.set("bias_correction", cs.bias_correction);
    const AdamParams p = AdamParams::from(o);
    const double c1 = cs.bias_correction ? 1 - std::pow(p.beta1_exact, double(cs.t)) : 1.0;
    const double c2 = cs.bias_correction ? 1 - std::pow(p.beta2_exact, double(cs.t)) : 1.0;
    // 8 is one F16C conversion; 513 and 1037 cross the kernel's 512-element blocks.
    for (const std::int64_t n : {1, 7, 8, 17, 513, 1037}) {
      const auto w0 = random_floats(n, 40), g = random_floats(n, 41),
                 m0 = random_floats(n, 42, 0.1), v_src = random_floats(n, 43, 0.1);
      std::vector<float> v0(v_src.size());
      for (std::size_t i = 0; i < v0.size(); ++i) v0[i] = v_src[i] * v_src[i];
      std::vector<Eigen::half> mh0(m0.size());
      for (std::size_t i = 0; i < mh0.size(); ++i) mh0[i] = Eigen::half(m0[i]);
      // m from the old m, v, and w from the m the update reads, with their tolerances.
      const auto moment = [&](double m_old, std::size_t i, double& tol) {
        const double a = double(p.beta1) * m_old, b = double(p.one_minus_beta1) * g[i];
        tol = 3 * kU * (std::abs(a) + std::abs(b));
        return a + b;
      };
      const auto second = [&](std::size_t i) {
        return double(p.beta2) * v0[i] + double(p.one_minus_beta2) * (double(g[i]) * g[i]);
      };
      const auto weight = [&](double m, double v, std::size_t i, double& tol) {
        const double step = (m / c1) / (std::sqrt(v / c2) + double(p.eps));
        const double decay = double(p.weight_decay) * w0[i];
        tol = 16 * kU * (std::abs(w0[i]) + double(p.lr) * (std::abs(step) + std::abs(decay)));
        return w0[i] - double(p.lr) * (step + decay);
      };
      for (const Kernels* k : runnable_levels()) {
        BOOST_TEST_CONTEXT(k->level << ", n " << n << ", t " << cs.t << ", bias correction "
                                    << cs.bias_correction << ", weight decay " << cs.wd) {
          std::vector<float> w(w0), m(m0), v(v0), wh(w0), vh(v0);
          std::vector<Eigen::half> mh(mh0);
          kernels_at<AdamKernels>(*k).step(w.data(), g.data(), m.data(), v.data(), n, cs.t, p);
          kernels_at<AdamKernels>(*k).step_half_m(wh.data(), g.data(), mh.data(), vh.data(), n,
                                                  cs.t, p);
          Mismatches mm;
          for (std::size_t i = 0; i < w.size(); ++i) {
            const auto e = std::int64_t(i);
            double m_tol = 0, w_tol = 0;
            const double m_ref = moment(m0[i], i, m_tol), v_ref = second(i);
            const double v_tol = 4 * kU * v_ref;
            mm.near(m[i], m_ref, m_tol, "m", 0, e);
            mm.near(v[i], v_ref, v_tol, "v", 0, e);
            const double w_ref = weight(m_ref, v_ref, i, w_tol);
            mm.near(w[i], w_ref, w_tol, "w", 0, e);

            const double mh_ref = moment(static_cast<float>(mh0[i]), i, m_tol);
            const double lo = round_to_half(mh_ref - m_tol), hi = round_to_half(mh_ref + m_tol);
            const double got = static_cast<float>(mh[i]);
            if (!(lo <= got && got <= hi))
              mm.note(fmt::format("float16 m[{}] = {}, want {} (the float16 rounding of {})", i,
                                  got, round_to_half(mh_ref), mh_ref));
            mm.near(vh[i], v_ref, v_tol, "v (float16 m)", 0, e);
            mm.near(wh[i], weight(got, v_ref, i, w_tol), w_tol, "w (float16 m)", 0, e);
          }
          expect_none(mm);
        }
      }
    }
  }
}

// SGD (sgd.h), torch's semantics, in double: d = g + wd w, b = mu b + d, step = d + mu b
// (nesterov), b (momentum) or d, w -= lr step. Each is a short sum of products: b within
// 3 u of its terms' magnitude, w within 8 u of |w0| + lr (the step's terms).
BOOST_AUTO_TEST_CASE(sgd_with_and_without_momentum_nesterov_and_weight_decay) {
  for (const std::int64_t n : {1, 7, 17, 513}) {
    const auto w0 = random_floats(n, 50), g = random_floats(n, 51), b0 = random_floats(n, 52);
    for (const double wd : {0.0, 0.01}) {
      for (const double mu : {0.0, 0.9}) {
        for (const bool nesterov : {false, true}) {
          if (nesterov && mu == 0.0) continue;
          const SgdParams p{0.05f, static_cast<float>(mu), static_cast<float>(wd), nesterov};
          for (const Kernels* k : runnable_levels()) {
            BOOST_TEST_CONTEXT(k->level << ", n " << n << ", weight decay " << wd << ", momentum "
                                        << mu << ", nesterov " << nesterov) {
              std::vector<float> w(w0), b(b0);
              kernels_at<SgdKernels>(*k).step(w.data(), g.data(), mu != 0.0 ? b.data() : nullptr, n,
                                              p);
              Mismatches m;
              for (std::size_t i = 0; i < w.size(); ++i) {
                const auto e = std::int64_t(i);
                const double decay = double(p.weight_decay) * w0[i], d = g[i] + decay;
                const double d_size = std::abs(double(g[i])) + std::abs(decay);
                double step = d, step_size = d_size;
                if (mu == 0.0) {
                  m.same_bits(b[i], b0[i], "momentum buffer (none: untouched)", 0, e);
                } else {
                  const double bi = double(p.momentum) * b0[i] + d;
                  const double b_size = double(p.momentum) * std::abs(double(b0[i])) + d_size;
                  m.near(b[i], bi, 3 * kU * b_size, "momentum buffer", 0, e);
                  step = nesterov ? d + double(p.momentum) * bi : bi;
                  step_size = nesterov ? d_size + double(p.momentum) * b_size : b_size;
                }
                m.near(w[i], w0[i] - double(p.lr) * step,
                       8 * kU * (std::abs(double(w0[i])) + double(p.lr) * step_size), "w", 0, e);
              }
              expect_none(m);
            }
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
