// One level's table of the transformer kernels: compiled once per level with its -march
// and its own table symbol (POPKIT_TRANSFORMER_SYMBOL), its other symbols renamed after.
#include "tests/engine/transformer_levels.h"

#include "engine/tensor/embedding.h"

#ifndef POPKIT_TRANSFORMER_SYMBOL
#error "POPKIT_TRANSFORMER_SYMBOL names this level's table (set by tests/engine/CMakeLists.txt)"
#endif
#ifndef POPKIT_KERNEL_LEVEL
#error "POPKIT_KERNEL_LEVEL names this level (set by tests/engine/CMakeLists.txt)"
#endif

extern "C" {
extern const popkit::test::TransformerKernels POPKIT_TRANSFORMER_SYMBOL;
const popkit::test::TransformerKernels POPKIT_TRANSFORMER_SYMBOL = {
    .level = POPKIT_KERNEL_LEVEL,
    .attention_forward = &popkit::engine::attention_forward,
    .attention_backward = &popkit::engine::attention_backward,
    .embedding_forward_columns = &popkit::engine::embedding_forward_columns<float>,
    .embedding_backward_columns = &popkit::engine::embedding_backward_columns<float>,
};
}
