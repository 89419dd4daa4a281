// One level's sgd kernel (sgd.h), compiled once per level by popkit_kernel_table.
#include "engine/kernels/sgd.h"
#include "engine/tensor/sgd.h"

namespace popkit::engine {

extern "C" const SgdKernels POPKIT_KERNEL_SYMBOL = {
    .step = &sgd_step,
};

}  // namespace popkit::engine
