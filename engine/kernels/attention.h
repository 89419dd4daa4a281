// The causal self-attention kernels (engine/tensor/attention.h) as one table per x86-64
// level (attention_level.cpp), for the decoder_block kind's engine entry. Each call runs
// (batch, head) pairs [p0, p1) with its own scratch (planner/attention_workspace.h).
#pragma once

#include <cstdint>

#include "engine/kernels/kernels.h"
#include "engine/tensor/attention_dropout.h"
#include "planner/attention_workspace.h"

namespace popkit::engine {

struct AttentionKernels {
  void (*forward)(const float* qkv, float* out, float* probs, const planner::AttentionShape& shape,
                  std::int64_t p0, std::int64_t p1, const AttentionDropout& dropout,
                  float* workspace, std::uint64_t workspace_bytes);
  void (*backward)(const float* dout, const float* qkv, const float* probs, float* dqkv,
                   const planner::AttentionShape& shape, std::int64_t p0, std::int64_t p1,
                   const AttentionDropout& dropout, float* workspace,
                   std::uint64_t workspace_bytes);
};

POPKIT_KERNEL_LEVELS(AttentionKernels, attention);

}  // namespace popkit::engine
