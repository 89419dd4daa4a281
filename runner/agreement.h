// Set-up failures in a run over several processes (mpirun -np N). Until the engines
// exist no rank waits for another, so a rank that fails there (a missing data file, a
// bad checkpoint, an invalid config) meets the others at one all_gather instead of
// aborting them: every rank learns the lowest rank that failed, that rank alone prints
// its error (with its rank), and all exit with its code. In one process it is the
// plain error, unchanged. And before the ranks work together they check that they run
// the same thing: settings that decide the run must be every rank's alike.
//
//   SetupAgreement agreement(engine::process_world());
//   try { ...set-up...; agreement.reached(); } catch (...) { agreement.fail(); }
#pragma once

#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/runtime/world.h"
#include "runner/input_refused.h"

namespace popkit::runner {

class SetupAgreement {
 public:
  explicit SetupAgreement(engine::World& world) : world_(world) {}

  // This rank's set-up succeeded: returns when every rank's did, else throws AgreedError
  // (silent here: the failing rank prints).
  void reached();
  // Every rank's set-up so far succeeded, or throws AgreedError as reached() does: called
  // before a collective (rank 0 deciding for all, ranks comparing) that follows work that
  // may fail on one rank alone, so a failed rank, meeting the others in fail(), never
  // meets them in that collective instead.
  void sync();
  // Called from a catch block after this rank's set-up failed before reached(): meets
  // the others' reached() and throws AgreedError with the current exception's message,
  // printed by the lowest failing rank, every rank exiting with its code (2 for
  // InputRefused, else `exit_code`). After reached(), rethrows the exception as is; in
  // one process too, but for InputRefused, which becomes an AgreedError of exit code 2.
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

// A setting that decides the run, as text: {"--steps", "10"}.
using Setting = std::pair<std::string, std::string>;

// Every rank must give the same settings, in the same order: when one differs from rank
// 0's, every rank throws AgreedError (exit 2; rank 0 prints it) naming the first that
// differs, its value on rank 0 and on the first rank that differs, so that ranks started
// with different command lines stop before step 1 instead of waiting for each other in
// different steps. In one process it returns at once.
void check_ranks_agree(engine::World& world, const std::vector<Setting>& settings,
                       const std::string& what);

// What rank 0 alone decides (the run folder it creates, what --resume names), sent to
// every rank as JSON; in one process, `decide()`. A failure in `decide` is every rank's:
// rank 0 prints it, and every rank exits with its code (an AgreedError's own, 2 for
// InputRefused, else 1).
nlohmann::json decided_on_rank_0(engine::World& world,
                                 const std::function<nlohmann::json()>& decide);

}  // namespace popkit::runner
