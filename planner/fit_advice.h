// What to change so that a config whose plan does not fit its device memory does: every
// change given is planned and fits (a change that leaves the peak over the budget is
// never advice). For training, the tuner's candidates at the config's replicas and
// global batch (micro-batch splits among them), then at 2, 4, ... 64 times the replicas;
// for evaluation, smaller eval micro-batches, then more replicas.
//
//   std::vector<FitAdvice> advice = advise_fit(config, Program::kTrain);
//   if (advice.front().fits) ...   // else: nothing planned fits; front() has the least peak
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "config/config.h"
#include "planner/plan.h"
#include "planner/tune.h"

namespace popkit::planner {

// More replicas are tried up to this many times the config's (and kMaxReplicationFactor).
inline constexpr std::int64_t kMoreReplicas = 64;

// At least one entry. Each that fits: its --set changes to the config, its peak and
// estimate. When none fits, one entry that does not: no changes, and the least peak of
// all candidates planned. Train: the fewest changes at the config's replicas (then the
// fastest); only when none fits there, the fewest replicas that fit with their fewest
// changes. Eval: the largest eval.micro_batch_size below the config's that fits, and the
// fewest replicas that fit.
std::vector<FitAdvice> advise_fit(const config::Config& config, Program program = Program::kTrain);

// After `tuned` (tune(config, request)) found nothing that fits: the fewest of 2, 4, ...
// 64 times the request's replicas (over which its global batch splits) at which a
// candidate fits, with the fewest changes of those; when none does, an entry that does
// not fit, with the least peak of every candidate planned (tuned's included).
FitAdvice advise_beyond_tune(const config::Config& config, const TuneRequest& request,
                             const TuneResult& tuned);

// {"fits", "settings", "peak_bytes", "samples_per_second", "planned"}: the advice in plan
// and tune JSON.
nlohmann::json fit_advice_json(const FitAdvice& advice);

// The advice as lines: "fits with: --set a=b (peak 812.00 MiB of 900.00 MiB, est. 41,200
// samples/s; the fewest changes that fit of the 658 candidates popplan tune planned)",
// or that nothing planned fits, with the least peak.
std::string describe_advice(const FitAdvice& advice, std::uint64_t memory_per_replica);

}  // namespace popkit::planner
