// The transformer kernels (engine/tensor/attention.h, embedding.h) compiled once per
// x86-64 level for their tests, a kernel table as the engine's kinds have
// (engine/kernels/kernels.h), until the layer kinds' tables carry them into the engine.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/tensor/attention.h"

namespace popkit::test {

struct TransformerKernels {
  const char* level;
  void (*attention_forward)(const float* qkv, float* out, float* probs,
                            const planner::AttentionShape& shape, std::int64_t p0, std::int64_t p1,
                            const engine::AttentionDropout& dropout, float* workspace,
                            std::uint64_t workspace_bytes);
  void (*attention_backward)(const float* dout, const float* qkv, const float* probs, float* dqkv,
                             const planner::AttentionShape& shape, std::int64_t p0, std::int64_t p1,
                             const engine::AttentionDropout& dropout, float* workspace,
                             std::uint64_t workspace_bytes);
  // Token ids as float, as the host stream delivers labels.
  void (*embedding_forward_columns)(const float* tokens, const float* wte, const float* wpe,
                                    float* out, std::int64_t B, std::int64_t T, std::int64_t C,
                                    std::int64_t V, std::int64_t c0, std::int64_t c1);
  void (*embedding_backward_columns)(const float* tokens, const float* dout, float* dwte,
                                     float* dwpe, std::int64_t B, std::int64_t T, std::int64_t C,
                                     std::int64_t V, std::int64_t c0, std::int64_t c1);
};

// The levels of this build that this CPU runs, lowest first.
std::vector<const TransformerKernels*> transformer_levels();

}  // namespace popkit::test

namespace popkit::engine {
POPKIT_KERNEL_LEVELS(test::TransformerKernels, test_transformer);
}  // namespace popkit::engine
