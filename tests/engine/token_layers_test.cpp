// The language model's two ends at every level this CPU runs: the token + position
// embedding (engine/tensor/embedding.h) and the softmax cross-entropy over a vocabulary
// per token (layers.h's, rows = B T), against double references at awkward sizes.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/kernels/embedding.h"
#include "engine/kernels/kernels.h"
#include "engine/tensor/random.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using namespace popkit::test;

namespace {

struct EmbeddingShape {
  std::int64_t B, T, C, V, max_T;
};

// C 1, 7, 17 and 130 (a packet and a half at AVX-512 and a partial one); T 1 and 17 with
// tables of 19 positions; V 3 (every token repeats) and 256 (bytes).
std::vector<EmbeddingShape> embedding_shapes() {
  std::vector<EmbeddingShape> all;
  for (const std::int64_t B : {1, 3})
    for (const std::int64_t T : {1, 17})
      for (const std::int64_t C : {1, 7, 17, 130})
        for (const std::int64_t V : {3, 256}) all.push_back({B, T, C, V, 19});
  return all;
}

std::vector<float> random_tokens(std::int64_t n, std::int64_t V, std::uint64_t seed) {
  std::vector<float> tokens(static_cast<std::size_t>(n));
  std::uint64_t state = seed;
  for (float& t : tokens)
    t = static_cast<float>(uniform_below(state, static_cast<std::uint64_t>(V)));
  return tokens;
}

// Column ranges [c0, c1) of a sequence of calls: whole, then in two (cut inside a packet).
std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> column_splits(std::int64_t C) {
  const std::int64_t cut = C / 2 + 1 > C ? C : C / 2 + 1;
  return {{{0, C}}, {{cut, C}, {0, cut}}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(embedding)

BOOST_AUTO_TEST_CASE(forward_adds_the_token_and_position_rows) {
  // A sum of two floats, rounded once: the double sum rounded to float, bit for bit.
  for (const Kernels* k : runnable_levels())
    for (const EmbeddingShape& s : embedding_shapes())
      for (const auto& split : column_splits(s.C))
        BOOST_TEST_CONTEXT(k->level << " B " << s.B << " T " << s.T << " C " << s.C << " V " << s.V
                                    << " calls " << split.size()) {
          const auto tokens = random_tokens(s.B * s.T, s.V, 5);
          const auto wte = random_floats(s.V * s.C, 6), wpe = random_floats(s.max_T * s.C, 7);
          std::vector<float> out(static_cast<std::size_t>(s.B * s.T * s.C), kUnwritten);
          for (const auto& [c0, c1] : split)
            kernels_at<EmbeddingKernels>(*k).forward_columns(
                tokens.data(), wte.data(), wpe.data(), out.data(), s.B, s.T, s.C, s.V, c0, c1);
          Mismatches m;
          for (std::int64_t i = 0; i < s.B * s.T; ++i)
            for (std::int64_t c = 0; c < s.C; ++c) {
              const auto token = static_cast<std::int64_t>(tokens[i]);
              const double want = double(wte[token * s.C + c]) + wpe[(i % s.T) * s.C + c];
              m.same_bits(out[i * s.C + c], static_cast<float>(want), "out", i, c);
            }
          expect_none(m);
        }
}

BOOST_AUTO_TEST_CASE(backward_scatters_adds_into_both_tables) {
  // Each table row gathers the rows of dout that used it, added to what it held: within
  // sum_tolerance of the double sum, and bit for bit the same in any column split.
  for (const Kernels* k : runnable_levels())
    for (const EmbeddingShape& s : embedding_shapes())
      BOOST_TEST_CONTEXT(k->level << " B " << s.B << " T " << s.T << " C " << s.C << " V " << s.V) {
        const auto tokens = random_tokens(s.B * s.T, s.V, 5);
        const auto dout = random_floats(s.B * s.T * s.C, 8);
        const auto wte0 = random_floats(s.V * s.C, 9), wpe0 = random_floats(s.max_T * s.C, 10);
        std::vector<Sum> te(wte0.size()), pe(wpe0.size());
        for (std::size_t j = 0; j < te.size(); ++j) te[j].add(wte0[j]);
        for (std::size_t j = 0; j < pe.size(); ++j) pe[j].add(wpe0[j]);
        std::vector<std::int64_t> terms_te(static_cast<std::size_t>(s.V), 1),
            terms_pe(static_cast<std::size_t>(s.max_T), 1);
        for (std::int64_t i = 0; i < s.B * s.T; ++i) {
          const auto token = static_cast<std::int64_t>(tokens[i]);
          ++terms_te[token];
          ++terms_pe[i % s.T];
          for (std::int64_t c = 0; c < s.C; ++c) {
            te[token * s.C + c].add(dout[i * s.C + c]);
            pe[(i % s.T) * s.C + c].add(dout[i * s.C + c]);
          }
        }
        std::vector<float> first_te, first_pe;
        for (const auto& split : column_splits(s.C)) {
          auto wte = wte0, wpe = wpe0;
          for (const auto& [c0, c1] : split)
            kernels_at<EmbeddingKernels>(*k).backward_columns(
                tokens.data(), dout.data(), wte.data(), wpe.data(), s.B, s.T, s.C, s.V, c0, c1);
          if (first_te.empty()) {
            first_te = wte;
            first_pe = wpe;
          }
          Mismatches m;
          for (std::size_t j = 0; j < wte.size(); ++j) {
            const auto r = static_cast<std::int64_t>(j) / s.C,
                       c = static_cast<std::int64_t>(j) % s.C;
            m.near(wte[j], te[j].value, sum_tolerance(terms_te[r], te[j].magnitude), "dwte", r, c);
            m.same_bits(wte[j], first_te[j], "dwte against one call", r, c);
          }
          for (std::size_t j = 0; j < wpe.size(); ++j) {
            const auto r = static_cast<std::int64_t>(j) / s.C,
                       c = static_cast<std::int64_t>(j) % s.C;
            m.near(wpe[j], pe[j].value, sum_tolerance(terms_pe[r], pe[j].magnitude), "dwpe", r, c);
            m.same_bits(wpe[j], first_pe[j], "dwpe against one call", r, c);
          }
          expect_none(m);
        }
      }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(token_cross_entropy)

BOOST_AUTO_TEST_CASE(the_loss_over_a_vocabulary_is_the_mean_over_every_token) {
  // layers.h's softmax cross-entropy serves next-token prediction unchanged: rows = B T
  // tokens (here 3 x 17 and 1 x 129), V = 256 byte classes (and 50,257, GPT-2's, on a
  // few rows), labels as floats (exact below 2^24). Loss: the mean of B T terms of
  // log-sum-exp, each within (V + 8) u of its magnitude; dlogits within (V + 8) u / rows.
  struct Case {
    std::int64_t rows, V;
  };
  for (const Kernels* k : runnable_levels())
    for (const Case c : {Case{51, 256}, Case{129, 256}, Case{3, 50257}})
      BOOST_TEST_CONTEXT(k->level << " rows " << c.rows << " V " << c.V) {
        const auto logits = random_floats(c.rows * c.V, 13, 2.0);
        const auto labels = random_tokens(c.rows, c.V, 14);
        std::vector<float> dlogits(logits.size(), kUnwritten);
        const float loss =
            k->softmax_cross_entropy(logits.data(), labels.data(), dlogits.data(), c.rows, c.V);
        double want = 0.0, magnitude = 0.0;
        Mismatches m;
        const double tol_u = static_cast<double>(c.V + 8) * kU;
        for (std::int64_t i = 0; i < c.rows; ++i) {
          const float* row = logits.data() + i * c.V;
          double max = row[0];
          for (std::int64_t j = 0; j < c.V; ++j) max = std::max(max, double(row[j]));
          double sum = 0.0;
          for (std::int64_t j = 0; j < c.V; ++j) sum += std::exp(row[j] - max);
          const auto label = static_cast<std::int64_t>(labels[i]);
          want += std::log(sum) - (row[label] - max);
          magnitude += 1.0 + std::log(sum) + std::abs(row[label] - max);
          for (std::int64_t j = 0; j < c.V; ++j) {
            const double p = std::exp(row[j] - max) / sum;
            const double g = (p - (j == label ? 1.0 : 0.0)) / static_cast<double>(c.rows);
            m.near(dlogits[i * c.V + j], g, tol_u * (p + 1.0) / static_cast<double>(c.rows),
                   "dlogits", i, j);
          }
        }
        want /= static_cast<double>(c.rows);
        magnitude /= static_cast<double>(c.rows);
        expect_none(m);
        BOOST_TEST(std::abs(loss - want) <= (tol_u + static_cast<double>(c.rows) * kU) * magnitude,
                   "loss " << loss << ", want " << want);
      }
}

BOOST_AUTO_TEST_SUITE_END()
