// One level's linear kernels (linear.h), compiled once per level by popkit_kernel_table.
#include "engine/kernels/linear.h"
#include "engine/tensor/layers.h"

namespace popkit::engine {

extern "C" const LinearKernels POPKIT_KERNEL_SYMBOL = {
    .forward_columns = &linear_act_forward_columns<float>,
    .grad_columns = &linear_grad_columns<float>,
    .dx_columns = &linear_dx_columns<float>,
    .activation_backward = &activation_backward<float>,
};

}  // namespace popkit::engine
