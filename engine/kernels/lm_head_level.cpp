// One level's lm_head kernels (lm_head.h), compiled once per level by popkit_kernel_table.
#include "engine/kernels/lm_head.h"
#include "engine/tensor/lm_head.h"

namespace popkit::engine {

extern "C" const LmHeadKernels POPKIT_KERNEL_SYMBOL = {
    .forward_columns = &lm_head_forward_columns<float>,
    .dx_columns = &lm_head_dx_columns<float>,
    .grad_rows = &lm_head_grad_rows<float>,
};

}  // namespace popkit::engine
