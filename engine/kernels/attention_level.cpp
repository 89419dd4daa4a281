// One level's attention kernels (attention.h), compiled once per level by
// popkit_kernel_table.
#include "engine/kernels/attention.h"
#include "engine/tensor/attention.h"

namespace popkit::engine {

extern "C" const AttentionKernels POPKIT_KERNEL_SYMBOL = {
    .forward = &attention_forward,
    .backward = &attention_backward,
};

}  // namespace popkit::engine
