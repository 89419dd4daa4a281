// poprun: executes a config's plan on this CPU: trains, evaluates, measures.
#include <exception>
#include <string>

#include "cli/verbs.h"
#include "engine/kernels/kernels.h"

namespace {

// "kernels x86-64-v4 (AVX-512), chosen from cpuid; built: x86-64, x86-64-v2, ..." or,
// when POPKIT_CPU_LEVEL names a level that cannot run, what is wrong with it.
std::string kernels_line() {
  std::string built;
  for (const auto* k : popkit::engine::kernel_levels())
    built += (built.empty() ? "" : ", ") + std::string(k->level);
  try {
    return "kernels " + popkit::engine::kernels_in_use() + "; built: " + built;
  } catch (const std::exception& e) {
    return "kernels: error: " + std::string(e.what()) + "; built: " + built;
  }
}

}  // namespace

int main(int argc, char** argv) {
  popkit::cli::Tool tool("poprun", "poprun: execute a popkit plan on this CPU: train and evaluate");
  tool.add_version_detail(kernels_line);
  popkit::cli::add_run_verbs(tool);
  return tool.main(argc, argv);
}
