// Set-up failures in a run over several processes (mpirun -np N). Until the engines
// exist no rank waits for another, so a rank that fails there (a missing data file, a
// bad checkpoint, an invalid config) meets the others at one all_gather instead of
// aborting them: every rank learns the lowest rank that failed, that rank alone prints
// its error (with its rank), and all exit with the same code. In one process it is the
// plain error, unchanged.
//
//   SetupAgreement agreement(engine::process_world());
//   try { ...set-up...; agreement.reached(); } catch (...) { agreement.fail(); }
#pragma once

#include <exception>
#include <string>

#include "engine/runtime/world.h"

namespace popkit::runner {

class SetupAgreement {
 public:
  explicit SetupAgreement(engine::World& world) : world_(world) {}

  // This rank's set-up succeeded: returns when every rank's did, else throws AgreedError
  // (silent here: the failing rank prints).
  void reached();
  // Called from a catch block after this rank's set-up failed before reached(): meets
  // the others' reached() and throws AgreedError with the current exception's message,
  // printed by the lowest failing rank. After reached(), rethrows the exception as is.
  [[noreturn]] void fail(int exit_code = 1);
  // The same for a failure already printed on this rank's error stream (`shown`, empty
  // when nothing was shown) or held as text: config diagnostics. Returns normally when no
  // rank failed.
  void agree(const std::string& failure, bool printed_here, int exit_code);

  [[nodiscard]] bool done() const { return done_; }

 private:
  engine::World& world_;
  bool done_ = false;
};

}  // namespace popkit::runner
