// The attention's dropout on its probabilities, apart from the kernels
// (engine/tensor/attention.h): the engine's code at the base level fills one without
// including the per-level inline kernels.
#pragma once

#include <cstdint>

namespace popkit::engine {

// Dropout on the probabilities (GPT-2's attn_pdrop): element (t, k) of head h in sample
// b is kept iff dropout_keeps(sample_keys[b], (h T + t) T + k, threshold); the decoder
// block keys each sample at its attention's site (dropout_site_key, decoder_block.cpp).
// rate 0: no dropout, no keys.
struct AttentionDropout {
  double rate = 0.0;
  const std::uint64_t* sample_keys = nullptr;  // B keys
};

}  // namespace popkit::engine
