// The decoder_block kind's engine entry (GPT-2's pre-LN block; its operands are
// planner/transformer_kinds.cpp's, its workspace planner/decoder_block_layout.h's):
//   a = ln1(x); qkv = a Wqkv + bqkv; o = attention(qkv); h = x + drop(o Wproj + bproj)
//   m = ln2(h); f = gelu(m Wfc + bfc); y = h + drop(f Wfc2 + bfc2)
// and its backward in reverse, on the layer norms', linears' and attention's kernels.
#pragma once

#include <cstdint>

#include "engine/layer_kinds.h"

namespace popkit::engine {

// The block drops in three places, each with its own masks: the attention's
// probabilities (attention_dropout; element (h T + t) T + k of a sample, AttentionDropout)
// and the two residual branches (residual_dropout; element t C + c of a sample).
enum class DropoutSite : std::uint64_t { kAttention, kAttentionResidual, kMlpResidual };
// The key of a sample's mask at a site: dropout_rows's key of the sample at the layer
// (training.seed, the optimizer step, its index in the global batch), then the site's.
std::uint64_t decoder_block_dropout_key(std::uint64_t seed, std::int64_t step, std::int64_t sample,
                                        std::int64_t layer, DropoutSite site);

void decoder_block_forward(const planner::Op& op, const planner::LayerInfo& l, const OpRun& run);
void decoder_block_backward(const planner::Op& op, const planner::LayerInfo& l, const OpRun& run);

}  // namespace popkit::engine
