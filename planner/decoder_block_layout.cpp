// The decoder block's layout (decoder_block_layout.h).
#include "planner/decoder_block_layout.h"

#include <algorithm>

#include "planner/workspace.h"

namespace popkit::planner::decoder_block {
namespace {

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}
std::uint64_t round_up(std::uint64_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}
// Bytes of a float32 [rows, T, width] buffer, from a 64-byte line.
std::uint64_t floats(std::int64_t rows, std::int64_t t, std::int64_t width) {
  return round_up(u(rows) * u(t) * u(width) * sizeof(float));
}

// The packing's region: the largest of the linears' (they run one after another) and
// the attention's, a region per (batch, head) pair.
std::uint64_t gemm_bytes(const Dims& d, bool backward, bool dropout) {
  std::uint64_t most = 0;
  for (const Linear& g : linears(d))
    most = std::max(most, backward ? linear_backward_workspace(d.n(), g.in, g.out, true).bytes()
                                   : linear_forward_workspace(d.n(), g.in, g.out).bytes());
  return std::max(most, u(d.attention().pairs()) * attention_region(d, backward, dropout));
}

template <int N>
Scratch<N> lay_out(const std::array<std::uint64_t, N>& sizes, std::uint64_t gemm) {
  Scratch<N> s;
  std::uint64_t at = 0;
  for (int i = 0; i < N; ++i) {
    s.offset[static_cast<std::size_t>(i)] = at;
    at += sizes[static_cast<std::size_t>(i)];
  }
  s.gemm_offset = at;
  s.gemm_bytes = gemm;
  return s;
}

}  // namespace

Dims dims(const LayerInfo& l, std::int64_t rows) {
  return {rows, l.sequence, l.in_features / l.sequence, l.attributes.integer("heads"),
          l.attributes.integer("hidden")};
}

std::array<Linear, 4> linears(const Dims& d) {
  return {{{d.C, 3 * d.C}, {d.C, d.C}, {d.C, d.H}, {d.H, d.C}}};
}

std::uint64_t attention_region(const Dims& d, bool backward, bool dropout) {
  return round_up(backward ? attention_backward_call_workspace(d.attention())
                           : attention_forward_call_workspace(d.attention(), dropout));
}

Scratch<kForwardBuffers> forward_scratch(const LayerInfo& l, std::int64_t rows, bool saves) {
  const Dims d = dims(l, rows);
  // Evaluation (nothing saved) drops nothing.
  const bool dropout = saves && l.attributes.number("attention_dropout") > 0;
  const std::uint64_t gemm = gemm_bytes(d, false, dropout);
  if (saves) return lay_out<kForwardBuffers>({}, gemm);
  const std::uint64_t c = floats(rows, d.T, d.C), stat = floats(rows, d.T, 1);
  return lay_out<kForwardBuffers>({c, floats(rows, d.T, 3 * d.C), floats(rows * d.NH, d.T, d.T), c,
                                   c, c, floats(rows, d.T, d.H), stat, stat},
                                  gemm);
}

Scratch<kBackwardBuffers> backward_scratch(const LayerInfo& l, std::int64_t rows) {
  const Dims d = dims(l, rows);
  const std::uint64_t c = floats(rows, d.T, d.C);
  return lay_out<kBackwardBuffers>({c, c, c, c, floats(rows, d.T, d.H), floats(rows, d.T, 3 * d.C)},
                                   gemm_bytes(d, true, false));
}

}  // namespace popkit::planner::decoder_block
