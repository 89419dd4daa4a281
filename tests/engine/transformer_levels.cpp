// One level's table of the transformer kernels (transformer_levels.h), compiled once per
// level by popkit_kernel_table (cmake/kernel_levels.cmake).
#include "tests/engine/transformer_levels.h"

#include "engine/tensor/embedding.h"

namespace popkit::test {

extern "C" const TransformerKernels POPKIT_KERNEL_SYMBOL = {
    .level = POPKIT_KERNEL_LEVEL,
    .attention_forward = &engine::attention_forward,
    .attention_backward = &engine::attention_backward,
    .embedding_forward_columns = &engine::embedding_forward_columns<float>,
    .embedding_backward_columns = &engine::embedding_backward_columns<float>,
};

}  // namespace popkit::test
