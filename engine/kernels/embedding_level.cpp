// One level's embedding kernels (embedding.h), compiled once per level by
// popkit_kernel_table.
#include "engine/kernels/embedding.h"
#include "engine/tensor/embedding.h"

namespace popkit::engine {

extern "C" const EmbeddingKernels POPKIT_KERNEL_SYMBOL = {
    .forward_columns = &embedding_forward_columns<float>,
    .backward_columns = &embedding_backward_columns<float>,
};

}  // namespace popkit::engine
