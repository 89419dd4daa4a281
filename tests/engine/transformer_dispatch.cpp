// The transformer kernels' levels this CPU runs: those whose engine kernel table of the
// same level runs here (engine::runs_here).
#include <string_view>

#include "engine/kernels/kernels.h"
#include "popkit/test_transformer_levels.h"  // generated: POPKIT_TRANSFORMER_TABLES(X)
#include "tests/engine/transformer_levels.h"

extern "C" {
#define POPKIT_DECLARE_TABLE(symbol) extern const popkit::test::TransformerKernels symbol;
POPKIT_TRANSFORMER_TABLES(POPKIT_DECLARE_TABLE)
#undef POPKIT_DECLARE_TABLE
}

namespace popkit::test {

std::vector<const TransformerKernels*> transformer_levels() {
#define POPKIT_TABLE_ADDRESS(symbol) &symbol,
  constexpr const TransformerKernels* kTables[] = {POPKIT_TRANSFORMER_TABLES(POPKIT_TABLE_ADDRESS)};
#undef POPKIT_TABLE_ADDRESS
  std::vector<const TransformerKernels*> out;
  for (const TransformerKernels* t : kTables)
    for (const engine::Kernels* k : engine::kernel_levels())
      if (std::string_view(k->level) == t->level && engine::runs_here(*k)) out.push_back(t);
  return out;
}

}  // namespace popkit::test
