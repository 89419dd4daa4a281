// GPT-2's input layer: a token embedding wte [V, C] gathered by token id plus a learned
// position embedding wpe [maxT, C] (maxT >= T), forward and backward, on float. Plain
// inline functions, so that they compile once per x86-64 level as layers.h does.
//
// Shape letters: B batch, T sequence, C channels, V vocabulary; row i = b T + t of the
// [B T, C] output is sample b's position t. Token ids come as the host stream delivers
// them (float for the labels today, bytes or int32 elsewhere): any arithmetic type.
//
// Both kernels work on columns [c0, c1) of C, so ranges may run on any number of threads
// with identical results: the backward's scatter-add visits rows in order 0 .. B T - 1
// for every column, so a table row's gradient is summed in the same order whatever the
// split.
#pragma once

#include <cstdint>

#include "base/error.h"

namespace popkit::engine {

namespace embedding {

// Row i's token id, checked against the vocabulary (the data reader's promise).
template <typename Token>
std::int64_t token_at(const Token* tokens, std::int64_t i, std::int64_t V) {
  const auto token = static_cast<std::int64_t>(tokens[i]);
  POPKIT_ASSERT(token >= 0 && token < V);
  return token;
}

}  // namespace embedding

// out[i, c] = wte[tokens[i], c] + wpe[i % T, c] for rows i < B T, columns [c0, c1).
template <typename Token>
void embedding_forward_columns(const Token* tokens, const float* wte, const float* wpe, float* out,
                               std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V,
                               std::int64_t c0, std::int64_t c1) {
  for (std::int64_t i = 0; i < B * T; ++i) {
    const float* e = wte + embedding::token_at(tokens, i, V) * C;
    const float* pos = wpe + (i % T) * C;
    float* o = out + i * C;
    for (std::int64_t c = c0; c < c1; ++c) o[c] = e[c] + pos[c];
  }
}

// dwte[tokens[i], c] += dout[i, c] and dwpe[i % T, c] += dout[i, c], rows i in order,
// columns [c0, c1). Adds to what the tables hold: the caller zeroes them, or keeps a
// tied head's share of dwte there (the head's backward runs first), or scales them for
// the gradient accumulator's running mean.
template <typename Token>
void embedding_backward_columns(const Token* tokens, const float* dout, float* dwte, float* dwpe,
                                std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V,
                                std::int64_t c0, std::int64_t c1) {
  for (std::int64_t i = 0; i < B * T; ++i) {
    const float* d = dout + i * C;
    float* ge = dwte + embedding::token_at(tokens, i, V) * C;
    float* gp = dwpe + (i % T) * C;
    for (std::int64_t c = c0; c < c1; ++c) {
      ge[c] += d[c];
      gp[c] += d[c];
    }
  }
}

}  // namespace popkit::engine
