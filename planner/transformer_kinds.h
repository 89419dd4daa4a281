// The planner's entries (planner/layer_kinds.h) for a decoder-only transformer's layer
// kinds, GPT-2's shape: embedding (token + learned position), decoder_block (pre-LN, causal
// multi-head self-attention, GELU MLP) and lm_head (logits over the vocabulary, its weight
// the embedding's token table when tied). layer_kinds.cpp lists them in its table.
//
// Shape letters as llm.c's: B the micro-batch's rows, T positions, C features a position,
// NH heads, H the MLP's hidden width, V vocabulary, P the position table's rows.
#pragma once

#include "planner/layer_kinds.h"

namespace popkit::planner {

const LayerKind& embedding_kind();
const LayerKind& decoder_block_kind();
const LayerKind& lm_head_kind();

}  // namespace popkit::planner
