// One level's layer_norm kernels (layer_norm.h), compiled once per level by
// popkit_kernel_table.
#include "engine/kernels/layer_norm.h"
#include "engine/tensor/layer_norm.h"

namespace popkit::engine {

extern "C" const LayerNormKernels POPKIT_KERNEL_SYMBOL = {
    .forward_rows = &layer_norm_forward_rows<float>,
    .dx_rows = &layer_norm_dx_rows<float>,
    .grad_columns = &layer_norm_grad_columns<float>,
};

}  // namespace popkit::engine
