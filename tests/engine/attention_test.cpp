// Causal multi-head self-attention (engine/tensor/attention.h) at every level this CPU
// runs, against the double reference of attention_reference.h at awkward sizes: B 1 and
// 3; T 1, 7, 17 (one row block) and 129 (two full blocks and a row); C 9 with one head
// and 21 with three (HS 9 and 7, no multiple of a packet); and gpt_tiny's heads (HS 32,
// T 128). Each output is checked within its first-order rounding bound (the reference's
// header gives the formulas); pairs outside a call's range keep their bytes; the saved
// probabilities fill exactly attention_saved_bytes and the scratch exactly the planned
// workspace (a guard after each, and the workspace's last 64-byte line used); results
// are bit for bit the same whatever the pair ranges and the buffers' addresses.
#include "engine/tensor/attention.h"

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/kernels/attention.h"
#include "engine/tensor/dropout.h"
#include "planner/attention_workspace.h"
#include "tests/engine/attention_reference.h"
#include "tests/support/kernel_check.h"

using namespace popkit::engine;
using namespace popkit::test;
using popkit::planner::AttentionShape;

namespace {

std::vector<AttentionShape> shapes() {
  std::vector<AttentionShape> all;
  for (const std::int64_t B : {1, 3})
    for (const std::int64_t T : {1, 7, 17, 129})
      for (const auto& [C, NH] : {std::pair<std::int64_t, std::int64_t>{9, 1}, {21, 3}})
        all.push_back({B, T, C, NH});
  all.push_back({2, 128, 128, 4});
  return all;
}

// Ranges of pairs [p0, p1) of a sequence of calls, covering pairs [begin, end).
struct PairSplit {
  const char* name;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::int64_t begin, end;
  [[nodiscard]] bool covers(std::int64_t p) const { return begin <= p && p < end; }
};

// Whole; one pair a call, the last first; the middle pairs (all but the first and last).
std::vector<PairSplit> pair_splits(std::int64_t pairs) {
  std::vector<std::pair<std::int64_t, std::int64_t>> singles;
  for (std::int64_t p = pairs - 1; p >= 0; --p) singles.emplace_back(p, p + 1);
  std::vector<PairSplit> out = {{"whole", {{0, pairs}}, 0, pairs}, {"singles", singles, 0, pairs}};
  if (pairs >= 3) out.push_back({"middle", {{1, pairs - 1}}, 1, pairs - 1});
  return out;
}

// A buffer of exactly `n` floats followed by a guard (GuardedWorkspace's pattern).
float fill_pattern() {
  float f;
  const std::uint32_t bits = 0xA5A5A5A5u;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

struct Dropout {
  std::vector<std::uint64_t> keys;
  AttentionDropout params;
  Dropout(double rate, std::int64_t B) {
    for (std::int64_t b = 0; b < B; ++b) keys.push_back(dropout_key(7, 3, b, 1));
    params = {rate, rate > 0.0 ? keys.data() : nullptr};
  }
};

std::vector<float> random_qkv(const AttentionShape& s) {
  return random_floats(s.batch * s.seq * 3 * s.channels, 11);
}

// The pair of element (row, col) of a [B T, width] tensor whose head h owns columns
// h HS + {0, C, 2 C} .. + HS (width 3 C) or h HS .. + HS (width C).
std::int64_t pair_of(const AttentionShape& s, std::int64_t row, std::int64_t col) {
  return row / s.seq * s.heads + col % s.channels / s.head_size();
}

// The kernel's forward on `split`, checked against the reference; returns probs and out.
std::pair<std::vector<float>, std::vector<float>> run_forward(const AttentionKernels& k,
                                                              const AttentionShape& s,
                                                              const std::vector<float>& qkv,
                                                              const AttentionDropout& dropout,
                                                              const PairSplit& split) {
  const std::uint64_t saved = popkit::planner::attention_saved_bytes(s);
  GuardedWorkspace probs(saved);
  GuardedWorkspace ws(popkit::planner::attention_forward_call_workspace(s, dropout.rate > 0));
  std::vector<float> out(static_cast<std::size_t>(s.batch * s.seq * s.channels), kUnwritten);
  for (const auto& [p0, p1] : split.ranges)
    k.forward(qkv.data(), out.data(), probs.data(), s, p0, p1, dropout, ws.data(), ws.bytes());
  BOOST_TEST(probs.guard_intact(), "wrote past the " << saved << " saved bytes");
  BOOST_TEST(ws.guard_intact(), "wrote past the " << ws.bytes() << " planned workspace bytes");
  BOOST_TEST(ws.touched() + 64 > ws.bytes(), "used " << ws.touched() << " of " << ws.bytes());
  const float* p = probs.data();
  return {std::vector<float>(p, p + saved / sizeof(float)), out};
}

void check_forward(const AttentionKernels& k, const AttentionShape& s, double rate) {
  const auto qkv = random_qkv(s);
  const Dropout dropout(rate, s.batch);
  const AttentionReference ref =
      attention_forward_reference(AttentionIndex{s, dropout.params}, qkv.data());
  std::vector<float> whole_probs, whole_out;
  for (const PairSplit& split : pair_splits(s.pairs())) {
    BOOST_TEST_CONTEXT(split.name) {
      const auto [probs, out] = run_forward(k, s, qkv, dropout.params, split);
      Mismatches m;
      const std::int64_t T = s.seq;
      for (std::int64_t p = 0; p < s.pairs(); ++p)
        for (std::int64_t i = p * T * T; i < (p + 1) * T * T; ++i) {
          if (!split.covers(p))
            m.same_bits(probs[i], fill_pattern(), "P (not in range)", i / T, i % T);
          else
            m.near(probs[i], ref.probs[i], ref.probs_tol[i], "P", i / T, i % T);
        }
      for (std::size_t i = 0; i < out.size(); ++i) {
        const auto row = static_cast<std::int64_t>(i) / s.channels,
                   col = static_cast<std::int64_t>(i) % s.channels;
        if (!split.covers(pair_of(s, row, col)))
          m.same_bits(out[i], kUnwritten, "out (not in range)", row, col);
        else
          m.near(out[i], ref.out[i], ref.out_tol[i], "out", row, col);
      }
      if (whole_out.empty()) {
        whole_probs = probs;
        whole_out = out;
      }
      for (std::size_t i = 0; i < out.size(); ++i)
        if (split.covers(pair_of(s, static_cast<std::int64_t>(i) / s.channels,
                                 static_cast<std::int64_t>(i) % s.channels)))
          m.same_bits(out[i], whole_out[i], "out against the whole range",
                      static_cast<std::int64_t>(i) / s.channels,
                      static_cast<std::int64_t>(i) % s.channels);
      expect_none(m);
    }
  }
}

void check_backward(const AttentionKernels& k, const AttentionShape& s, double rate) {
  const auto qkv = random_qkv(s);
  const auto dout = random_floats(s.batch * s.seq * s.channels, 12);
  const Dropout dropout(rate, s.batch);
  const AttentionGradReference ref =
      attention_backward_reference(AttentionIndex{s, dropout.params}, qkv.data(), dout.data());
  const PairSplit whole = pair_splits(s.pairs()).front();
  const std::vector<float> probs = run_forward(k, s, qkv, dropout.params, whole).first;
  std::vector<float> whole_dqkv;
  for (const PairSplit& split : pair_splits(s.pairs())) {
    BOOST_TEST_CONTEXT(split.name) {
      GuardedWorkspace ws(popkit::planner::attention_backward_call_workspace(s));
      std::vector<float> dqkv(qkv.size(), kUnwritten);
      for (const auto& [p0, p1] : split.ranges)
        k.backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), s, p0, p1, dropout.params,
                   ws.data(), ws.bytes());
      BOOST_TEST(ws.guard_intact(), "wrote past the " << ws.bytes() << " planned workspace bytes");
      BOOST_TEST(ws.touched() + 64 > ws.bytes(), "used " << ws.touched() << " of " << ws.bytes());
      if (whole_dqkv.empty()) whole_dqkv = dqkv;
      Mismatches m;
      const std::int64_t width = 3 * s.channels;
      for (std::size_t i = 0; i < dqkv.size(); ++i) {
        const auto row = static_cast<std::int64_t>(i) / width,
                   col = static_cast<std::int64_t>(i) % width;
        if (!split.covers(pair_of(s, row, col))) {
          m.same_bits(dqkv[i], kUnwritten, "dqkv (not in range)", row, col);
          continue;
        }
        m.near(dqkv[i], ref.dqkv[i], ref.dqkv_tol[i], "dqkv", row, col);
        m.same_bits(dqkv[i], whole_dqkv[i], "dqkv against the whole range", row, col);
      }
      expect_none(m);
    }
  }
}

// check(level, shape, dropout rate) at every level and shape, without and with dropout.
template <typename Check>
void every_case(Check&& check) {
  for (const Kernels* k : runnable_levels())
    for (const AttentionShape& s : shapes())
      for (const double rate : {0.0, 0.25})
        BOOST_TEST_CONTEXT(k->level << " B " << s.batch << " T " << s.seq << " C " << s.channels
                                    << " NH " << s.heads << " dropout " << rate) {
          check(kernels_at<AttentionKernels>(*k), s, rate);
        }
}

// sum(out * g) of the reference forward, for finite differences.
double weighted_out(const AttentionIndex& x, const std::vector<double>& qkv,
                    const std::vector<double>& g) {
  const AttentionReference r = attention_forward_reference(x, qkv.data());
  double sum = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) sum += r.out[i] * g[i];
  return sum;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(attention)

BOOST_AUTO_TEST_CASE(the_double_reference_backward_is_the_gradient_of_its_forward) {
  // T 4 with two heads of 2: every element of qkv moves the loss sum(out * g); central
  // differences with h = 1e-5 are within 1e-8 (their O(h^2) truncation, values O(1)).
  const AttentionShape s{1, 4, 4, 2};
  for (const double rate : {0.0, 0.5}) {
    BOOST_TEST_CONTEXT("dropout " << rate) {
      const Dropout dropout(rate, s.batch);
      const AttentionIndex x{s, dropout.params};
      std::vector<double> qkv(static_cast<std::size_t>(s.seq * 3 * s.channels)),
          g(static_cast<std::size_t>(s.seq * s.channels));
      const auto fq = random_floats(static_cast<std::int64_t>(qkv.size()), 21);
      const auto fg = random_floats(static_cast<std::int64_t>(g.size()), 22);
      std::copy(fq.begin(), fq.end(), qkv.begin());
      std::copy(fg.begin(), fg.end(), g.begin());
      const AttentionGradReference grad = attention_backward_reference(x, qkv.data(), g.data());
      constexpr double kH = 1e-5;
      for (std::size_t i = 0; i < qkv.size(); ++i) {
        auto plus = qkv, minus = qkv;
        plus[i] += kH;
        minus[i] -= kH;
        const double fd = (weighted_out(x, plus, g) - weighted_out(x, minus, g)) / (2 * kH);
        BOOST_TEST(std::abs(fd - grad.dqkv[i]) <= 1e-8,
                   "dqkv[" << i << "] = " << grad.dqkv[i] << ", differences " << fd);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(forward_matches_the_reference) {
  every_case(check_forward);
}

BOOST_AUTO_TEST_CASE(backward_matches_the_reference) {
  every_case(check_backward);
}

BOOST_AUTO_TEST_CASE(results_do_not_depend_on_the_buffers_addresses) {
  // qkv, dout and the outputs one float (4 bytes) off a 64-byte line, against aligned.
  const AttentionShape s{2, 17, 21, 3};
  const auto qkv = random_qkv(s);
  const auto dout = random_floats(s.batch * s.seq * s.channels, 12);
  const std::size_t n_probs = popkit::planner::attention_saved_bytes(s) / sizeof(float);
  GuardedWorkspace fws(popkit::planner::attention_forward_call_workspace(s, false));
  GuardedWorkspace bws(popkit::planner::attention_backward_call_workspace(s));
  for (const Kernels* k : runnable_levels()) {
    std::vector<float> runs[2][3];  // [offset][probs, out, dqkv]
    for (const std::size_t off : {std::size_t{0}, std::size_t{1}}) {
      std::vector<float> q(off + qkv.size()), d(off + dout.size()), probs(off + n_probs),
          out(off + dout.size()), dqkv(off + qkv.size());
      std::copy(qkv.begin(), qkv.end(), q.begin() + off);
      std::copy(dout.begin(), dout.end(), d.begin() + off);
      kernels_at<AttentionKernels>(*k).forward(q.data() + off, out.data() + off, probs.data() + off,
                                               s, 0, s.pairs(), {}, fws.data(), fws.bytes());
      kernels_at<AttentionKernels>(*k).backward(d.data() + off, q.data() + off, probs.data() + off,
                                                dqkv.data() + off, s, 0, s.pairs(), {}, bws.data(),
                                                bws.bytes());
      runs[off][0].assign(probs.begin() + off, probs.end());
      runs[off][1].assign(out.begin() + off, out.end());
      runs[off][2].assign(dqkv.begin() + off, dqkv.end());
    }
    for (int t = 0; t < 3; ++t)
      BOOST_TEST(
          std::memcmp(runs[0][t].data(), runs[1][t].data(), runs[0][t].size() * sizeof(float)) == 0,
          k->level << ": tensor " << t << " differs with the buffers moved");
  }
}

BOOST_AUTO_TEST_CASE(the_planned_bytes_follow_the_row_blocks) {
  // P is B NH T T floats; the scratch is one block of min(64, T) rows of T floats (the
  // backward's, or the forward's with dropout) plus the largest GEMM's packing.
  const AttentionShape tiny{16, 128, 128, 4};
  BOOST_TEST(popkit::planner::attention_saved_bytes(tiny) == 16u * 4 * 128 * 128 * 4);
  BOOST_TEST(popkit::planner::attention_block_bytes(tiny) == 64u * 128 * 4);
  BOOST_TEST(popkit::planner::attention_block_bytes({1, 7, 9, 1}) == 256u);  // 196 -> a line
  BOOST_TEST(popkit::planner::attention_forward_call_workspace(tiny, true) ==
             popkit::planner::attention_forward_call_workspace(tiny, false) + 64u * 128 * 4);
}

BOOST_AUTO_TEST_SUITE_END()
