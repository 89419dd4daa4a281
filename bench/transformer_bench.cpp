// The transformer's kernels at gpt_tiny's shapes (T 128, C 128, NH 4, V 256; B 8, 16
// and 32), one thread each, against this machine's one-thread sgemm rate: the rate of
// the GEMMs a kernel runs (GFLOP/s), and that rate as a share of sgemm's. Elementwise
// kernels (embedding, GELU, loss) report their time and bytes moved. A plain timing
// loop: each figure is the median of 7 runs of at least --seconds (0.2) each; sgemm is
// timed again before each B.
//
//   build/native/bench/transformer_bench [--seconds S] [--filter NAME-PART]
//
// The kernels are compiled into this program at its build's level: run it from a native
// build (cmake --preset native), as the engine's portable build would pick this CPU's
// best level at run time.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/kernels/linear.h"
#include "engine/tensor/attention.h"
#include "engine/tensor/embedding.h"
#include "engine/tensor/init.h"
#include "engine/tensor/layers.h"
#include "planner/attention_workspace.h"
#include "planner/workspace.h"

namespace {

using namespace popkit;

constexpr std::int64_t kT = 128, kC = 128, kHeads = 4, kV = 256;

double g_seconds = 0.2;

std::vector<float> random_vector(std::int64_t n, std::uint64_t key, double std = 1.0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  engine::fill_normal(v.data(), n, 0.0, std, key);
  return v;
}

// 64-byte aligned scratch of `bytes`, as the engine's workspace.
struct Workspace {
  explicit Workspace(std::uint64_t n) : bytes(n), floats(n / sizeof(float) + 16) {}
  float* data() {
    auto p = reinterpret_cast<std::uintptr_t>(floats.data());
    return reinterpret_cast<float*>((p + 63) / 64 * 64);
  }
  std::uint64_t bytes;
  std::vector<float> floats;
};

// Seconds per call of `f`: the median of 7 runs, each of enough calls to last g_seconds.
template <typename F>
double seconds_per_call(F&& f) {
  f();
  std::int64_t calls = 1;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < calls; ++i) f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= g_seconds) break;
    calls *= 2;
  }
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < calls; ++i) f();
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                   static_cast<double>(calls));
  }
  std::sort(runs.begin(), runs.end());
  return runs[3];
}

double g_sgemm = 0.0;  // FLOP/s of one thread's 1024 x 1024 x 1024 GEMM

std::string g_filter;  // --filter: only the kernels whose name holds it

// Times f and prints its row: its GEMMs' FLOP/s (flops > 0) and its bytes moved a second
// (bytes > 0).
template <typename F>
void row(const std::string& kernel, std::int64_t B, double flops, double bytes, F&& f) {
  if (kernel.find(g_filter) == std::string::npos) return;
  const double seconds = seconds_per_call(f);
  std::string rate, share, moved;
  if (flops > 0) {
    rate = fmt::format("{:.1f}", flops / seconds / 1e9);
    share = fmt::format("{:.0f}%", 100.0 * flops / seconds / g_sgemm);
  }
  if (bytes > 0) moved = fmt::format("{:.1f}", bytes / seconds / 1e9);
  fmt::print("| {:<41} | {:>2} | {:>9.1f} | {:>7} | {:>5} | {:>6} |\n", kernel, B, seconds * 1e6,
             rate, share, moved);
}

void measure_sgemm() {
  constexpr std::int64_t n = 1024;
  const auto a = random_vector(n * n, 1), b = random_vector(n * n, 2);
  std::vector<float> c(static_cast<std::size_t>(n * n));
  Workspace ws(planner::gemm_workspace_bytes(n, n, n));
  const double s = seconds_per_call([&] {
    engine::gemm<false, false>(n, n, n, a.data(), n, b.data(), n, c.data(), n, false, ws.data(),
                               ws.bytes);
  });
  g_sgemm = 2.0 * n * n * n / s;
}

// The GEMM FLOPs attention runs on one pair: two (forward) or four (backward) GEMMs of
// (r1 - r0) x r1 x HS per row block, the causal blocks' share of T x T x HS.
double attention_pair_flops(std::int64_t T, std::int64_t HS, int gemms) {
  double f = 0.0;
  for (std::int64_t r0 = 0; r0 < T; r0 += planner::kAttentionRows) {
    const std::int64_t r1 = std::min(T, r0 + planner::kAttentionRows);
    f += 2.0 * static_cast<double>((r1 - r0) * r1 * HS) * gemms;
  }
  return f;
}

void attention_rows(std::int64_t B) {
  const planner::AttentionShape s{B, kT, kC, kHeads};
  const auto qkv = random_vector(B * kT * 3 * kC, 3), dout = random_vector(B * kT * kC, 4);
  std::vector<float> out(dout.size()), probs(planner::attention_saved_bytes(s) / sizeof(float)),
      dqkv(qkv.size());
  Workspace fws(planner::attention_forward_call_workspace(s, false));
  Workspace bws(planner::attention_backward_call_workspace(s));
  const double pairs = static_cast<double>(s.pairs());
  // The backward reads the forward's probabilities: the forward runs first, once at least.
  engine::attention_forward(qkv.data(), out.data(), probs.data(), s, 0, s.pairs(), {}, fws.data(),
                            fws.bytes);
  row("attention forward", B, pairs * attention_pair_flops(kT, s.head_size(), 2), 0, [&] {
    engine::attention_forward(qkv.data(), out.data(), probs.data(), s, 0, s.pairs(), {}, fws.data(),
                              fws.bytes);
  });
  row("attention backward", B, pairs * attention_pair_flops(kT, s.head_size(), 4), 0, [&] {
    engine::attention_backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), s, 0, s.pairs(),
                               {}, bws.data(), bws.bytes);
  });
}

// A decoder block's linears through the engine's kernels: forward, then dx and the weight
// gradient (step 1 of an accumulation, as most steps are).
void linear_rows(std::int64_t B, std::int64_t in, std::int64_t out, const char* name,
                 config::Activation act) {
  const std::int64_t n = B * kT;
  const auto x = random_vector(n * in, 5), w = random_vector(in * out, 6, 0.02),
             bias = random_vector(out, 7);
  std::vector<float> pre(static_cast<std::size_t>(n * out)), y(pre.size()),
      dx(static_cast<std::size_t>(n * in)), gw(w.size()), gb(bias.size());
  const auto dy = random_vector(n * out, 8);
  Workspace fws(planner::linear_forward_call_workspace(n, in, 0, out));
  Workspace dws(planner::linear_dx_call_workspace(n, out, 0, in));
  Workspace gws(planner::linear_grad_call_workspace(n, in, 0, out));
  const engine::LinearKernels& k = engine::kernels_of<engine::LinearKernels>();
  const double gemm = 2.0 * static_cast<double>(n * in * out);
  row(fmt::format("{} forward ({} -> {})", name, in, out), B, gemm, 0, [&] {
    k.forward_columns(act, x.data(), w.data(), bias.data(), pre.data(), y.data(), n, in, out, 0,
                      out, fws.data(), fws.bytes);
  });
  row(fmt::format("{} backward", name), B, 2 * gemm, 0, [&] {
    k.dx_columns(dy.data(), w.data(), dx.data(), n, in, out, 0, in, dws.data(), dws.bytes);
    k.grad_columns(dy.data(), x.data(), gw.data(), gb.data(), n, in, out, 1, 0, out, gws.data(),
                   gws.bytes);
  });
}

void elementwise_rows(std::int64_t B) {
  const std::int64_t n = B * kT;
  std::vector<float> tokens(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) tokens[i] = static_cast<float>((i * 37) % kV);
  const auto wte = random_vector(kV * kC, 9), wpe = random_vector(kT * kC, 10);
  std::vector<float> x(static_cast<std::size_t>(n * kC)), dwte(wte.size()), dwpe(wpe.size());
  const auto floats = [](std::int64_t count) { return 4.0 * static_cast<double>(count); };
  // Forward: two table rows read, a row written; backward: dout read, two rows updated.
  row("embedding forward", B, 0, floats(3 * n * kC), [&] {
    engine::embedding_forward_columns(tokens.data(), wte.data(), wpe.data(), x.data(), B, kT, kC,
                                      kV, 0, kC);
  });
  row("embedding backward", B, 0, floats(5 * n * kC), [&] {
    engine::embedding_backward_columns(tokens.data(), x.data(), dwte.data(), dwpe.data(), B, kT, kC,
                                       kV, 0, kC);
  });
  const auto pre = random_vector(n * 4 * kC, 11);
  std::vector<float> h(pre.size()), dh(pre.size());
  row("GELU forward [B T, 4 C]", B, 0, floats(2 * n * 4 * kC), [&] {
    engine::activation_forward(config::Activation::kGelu, pre.data(), h.data(), n * 4 * kC);
  });
  row("GELU backward [B T, 4 C]", B, 0, floats(3 * n * 4 * kC), [&] {
    engine::kernels_of<engine::LinearKernels>().activation_backward(
        config::Activation::kGelu, pre.data(), dh.data(), n * 4 * kC);
  });
  const auto logits = random_vector(n * kV, 12);
  std::vector<float> dlogits(logits.size());
  row("cross-entropy [B T, V]", B, 0, floats(2 * n * kV), [&] {
    engine::kernels().softmax_cross_entropy(logits.data(), tokens.data(), dlogits.data(), n, kV);
  });
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--seconds") g_seconds = std::atof(argv[i + 1]);
    if (std::string(argv[i]) == "--filter") g_filter = argv[i + 1];
  }
  fmt::print("one thread; kernels at level {}\n", engine::kernels_in_use());
  fmt::print("| {:<41} | {:>2} | {:>9} | {:>7} | {:>5} | {:>6} |\n", "kernel", "B", "us/call",
             "GFLOP/s", "sgemm", "GB/s");
  fmt::print("|{:-<43}|{:-<4}|{:-<11}|{:-<9}|{:-<7}|{:-<8}|\n", "", "", "", "", "", "");
  for (const std::int64_t B : {8, 16, 32}) {
    // A shared machine's speed moves: each B's shares are of an sgemm timed just before.
    measure_sgemm();
    fmt::print("| sgemm 1024 x 1024 x 1024{:17} | {:>2} | {:>9.1f} | {:>7.1f} |       |        |\n",
               "", B, 2e6 * 1024 * 1024 * 1024 / g_sgemm, g_sgemm / 1e9);
    attention_rows(B);
    linear_rows(B, kC, 3 * kC, "qkv", config::Activation::kNone);
    linear_rows(B, kC, kC, "attention projection", config::Activation::kNone);
    linear_rows(B, kC, 4 * kC, "MLP fc, GELU", config::Activation::kGelu);
    linear_rows(B, 4 * kC, kC, "MLP projection", config::Activation::kNone);
    linear_rows(B, kC, kV, "head", config::Activation::kNone);
    elementwise_rows(B);
  }
  return 0;
}
