#include "runner/agreement.h"

#include <fmt/format.h>

#include "base/error.h"

namespace popkit::runner {

void SetupAgreement::reached() {
  done_ = true;
  agree("", false, 1);
}

void SetupAgreement::fail(int exit_code) {
  if (done_) throw;
  std::string message = "unknown failure";
  try {
    throw;
  } catch (const AgreedError&) {
    throw;
  } catch (const std::exception& e) {
    message = e.what();
  }
  if (world_.size() == 1) throw;  // one process: the error as it was
  done_ = true;
  agree(message, false, exit_code);
  POPKIT_ASSERT(false);  // agree() throws for a failure
}

void SetupAgreement::agree(const std::string& failure, bool printed_here, int exit_code) {
  const engine::RankMessage first = engine::first_failure(world_, failure);
  if (first.rank < 0) return;
  const bool mine = first.rank == world_.rank();
  // The lowest failing rank prints, unless it printed already (config diagnostics);
  // when that rank is not 0, say which rank it was.
  const bool print = mine && !printed_here;
  throw AgreedError(
      world_.size() > 1 ? fmt::format("rank {}: {}", first.rank, first.message) : first.message,
      print, exit_code);
}

}  // namespace popkit::runner
