// The transformer kernels' levels this CPU runs (engine::runs_here).
#include "engine/kernels/kernels.h"
#include "tests/engine/transformer_levels.h"

namespace popkit::test {

std::vector<const TransformerKernels*> transformer_levels() {
  std::vector<const TransformerKernels*> out;
  for (const engine::Kernels* k : engine::kernel_levels())
    if (engine::runs_here(*k)) out.push_back(&engine::kernels_at<TransformerKernels>(*k));
  return out;
}

}  // namespace popkit::test
