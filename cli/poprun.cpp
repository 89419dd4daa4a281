// poprun: executes a config's plan on this CPU: trains, evaluates, measures.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "cli/verbs.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/world.h"
#include "runner/stop_signal.h"

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
  // Under mpirun each rank is a poprun process hosting its share of the replicas
  // (engine/runtime/world.h); without it, one process hosts them all.
  std::optional<popkit::engine::WorldSession> session;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr)
    popkit::runner::StopSignals::block_until_handled();
  try {
    session.emplace(argc, argv);
  } catch (const std::exception& e) {  // MPI would not start, or not as poprun needs it
    std::cerr << "poprun: error: " << e.what() << '\n';
    return popkit::cli::kExitFailure;
  }
  popkit::cli::Tool tool(
      "poprun", "poprun: execute a popkit plan on this CPU: train and evaluate",
      "poprun train writes a checkpoint before it exits 130; 1 is a run that failed (out of "
      "host memory, a diverged loss, a rank that died). Run folders: runs/<config name>/.");
  tool.add_version_detail([] { return kernels_line() + "\n" + popkit::engine::mpi_build_info(); });
  // A failure in one rank after the ranks began to work together (others may be waiting
  // for it in a collective) is printed with its rank and ends every rank (MPI_Abort).
  tool.on_failure(
      [] {
        auto& world = popkit::engine::process_world();
        return world.size() > 1 ? "rank " + std::to_string(world.rank()) + ": " : std::string();
      },
      [](int code) {
        auto& world = popkit::engine::process_world();
        if (world.size() > 1) world.abort(code);
      },
      // When ranks fail at the same step (a NaN reduced into every replica), the lowest
      // prints and aborts first: rank k waits k tenths of a second (at most two seconds)
      // and is usually ended by then, so the error shows once.
      [] {
        auto& world = popkit::engine::process_world();
        if (world.size() > 1)
          std::this_thread::sleep_for(std::chrono::milliseconds(100 * std::min(world.rank(), 20)));
      });
  popkit::cli::add_run_verbs(tool);
  return tool.main(argc, argv);
}
