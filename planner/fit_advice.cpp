// Advice for a plan that does not fit, each change planned; see fit_advice.h.
#include "planner/fit_advice.h"

#include <fmt/format.h>

#include "base/error.h"
#include "base/units.h"
#include "config/validate.h"
#include "planner/build.h"
#include "planner/plan_text.h"

namespace popkit::planner {
namespace {

// Of the candidates that fit, the fewest changes, then the fastest (fits are fastest
// first by row): the smallest edit is the one a user can check and keep.
const TuneCandidate* fewest_changes(const TuneResult& r) {
  const TuneCandidate* best = nullptr;
  for (const TuneCandidate& c : r.fits)
    if (!best || c.changes.size() < best->changes.size() ||
        (c.changes.size() == best->changes.size() &&
         c.samples_per_second > best->samples_per_second))
      best = &c;
  return best;
}

FitAdvice advice_of(const TuneCandidate& c, std::size_t n_planned, std::string found) {
  return {true, c.changes, c.peak_bytes, c.samples_per_second, n_planned, std::move(found)};
}

// The replica counts beyond `replicas` tried for advice: 2, 4, ... 64 times, as many as a
// config may have, over which `global` splits.
std::vector<std::int64_t> more_replicas(std::int64_t replicas, std::int64_t global) {
  std::vector<std::int64_t> out;
  for (std::int64_t r = 2 * replicas;
       r <= kMoreReplicas * replicas && r <= config::kMaxReplicationFactor; r *= 2)
    if (global % r == 0) out.push_back(r);
  return out;
}

// The fewest of 2, 4, ... 64 times the request's replicas (over which its global batch
// splits) at which a candidate fits, with the fewest changes of those; nullopt when none
// does. `n_planned` counts what was planned, `least_peak` is lowered to the least peak.
std::optional<FitAdvice> advise_more_replicas(const config::Config& config,
                                              const TuneRequest& request, std::size_t& n_planned,
                                              std::uint64_t& least_peak) {
  const std::int64_t replicas = request.replicas > 0 ? request.replicas : config.replication.factor;
  const std::int64_t global = request.global_batch > 0 ? request.global_batch
                                                       : config.training.micro_batch_size *
                                                             config.training.gradient_accumulation *
                                                             config.replication.factor;
  for (const std::int64_t r : more_replicas(replicas, global)) {
    TuneRequest more = request;
    more.replicas = r;
    more.global_batch = global;
    TuneResult found;
    try {
      found = tune(config, more);
    } catch (const Error&) {
      break;  // a search past its bound: more replicas only grow it
    }
    n_planned += found.n_planned;
    if (found.smallest) least_peak = std::min(least_peak, found.smallest->peak_bytes);
    if (const TuneCandidate* best = fewest_changes(found))
      return advice_of(*best, n_planned,
                       fmt::format("the fewest replicas that fit, and the fewest changes there, "
                                   "of the {} candidates popplan tune planned",
                                   n_planned));
  }
  return std::nullopt;
}

std::vector<FitAdvice> advise_training(const config::Config& config) {
  const TuneRequest request{memory_per_replica(config)};
  const TuneResult r = tune(config, request);
  if (const TuneCandidate* best = fewest_changes(r))
    return {advice_of(*best, r.n_planned,
                      fmt::format("the fewest changes that fit of the {} candidates popplan "
                                  "tune planned",
                                  r.n_planned))};
  return {advise_beyond_tune(config, request, r)};
}

std::string setting(const char* key, std::int64_t value) {
  return fmt::format("{}={}", key, value);
}

// An evaluation plan of `c`, or nullopt when `c` is not a valid config.
std::optional<Plan> eval_plan(config::Config c) {
  if (config::has_errors(config::validate_config(c))) return std::nullopt;
  return build_plan(c, Program::kEval);
}

std::vector<FitAdvice> advise_evaluation(const config::Config& config) {
  std::vector<FitAdvice> out;
  std::size_t n_planned = 0;
  std::uint64_t least = std::numeric_limits<std::uint64_t>::max();
  // The first of `values` whose evaluation plan, with `key` set to it, fits.
  const auto first_fit = [&](const char* key, const std::vector<std::int64_t>& values,
                             const auto& set, const char* found) {
    for (const std::int64_t v : values) {
      config::Config c = config;
      set(c, v);
      const auto p = eval_plan(c);
      if (!p) continue;
      ++n_planned;
      least = std::min(least, p->peak_bytes);
      if (!p->fits) continue;
      out.push_back({true,
                     {setting(key, v)},
                     p->peak_bytes,
                     p->estimated_samples_per_second,
                     n_planned,
                     found});
      return;
    }
  };
  const std::int64_t mb = config.eval.micro_batch_size > 0 ? config.eval.micro_batch_size
                                                           : config.training.micro_batch_size;
  std::vector<std::int64_t> smaller;
  for (std::int64_t m = mb / 2; m >= 1; m /= 2) smaller.push_back(m);
  first_fit(
      "eval.micro_batch_size", smaller,
      [](config::Config& c, std::int64_t m) { c.eval.micro_batch_size = m; },
      "the largest evaluation micro-batch below the config's that fits");
  first_fit(
      "replication.factor", more_replicas(config.replication.factor, config.replication.factor),
      [](config::Config& c, std::int64_t r) { c.replication.factor = r; },
      "the fewest replicas that fit");
  if (out.empty()) {
    FitAdvice none;
    none.n_planned = n_planned;
    none.peak_bytes = n_planned > 0 ? least : 0;
    none.found = "with smaller evaluation micro-batches or more replicas";
    out.push_back(none);
  }
  return out;
}

}  // namespace

std::vector<FitAdvice> advise_fit(const config::Config& config, Program program) {
  return program == Program::kEval ? advise_evaluation(config) : advise_training(config);
}

FitAdvice advise_beyond_tune(const config::Config& config, const TuneRequest& request,
                             const TuneResult& tuned) {
  std::size_t n_planned = tuned.n_planned;
  constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t least = tuned.smallest ? tuned.smallest->peak_bytes : kNone;
  if (auto more = advise_more_replicas(config, request, n_planned, least)) return *more;
  FitAdvice none;
  none.n_planned = n_planned;
  none.peak_bytes = least == kNone ? 0 : least;  // over every replica count planned
  none.found = fmt::format("with up to {} times the replicas", kMoreReplicas);
  return none;
}

nlohmann::json fit_advice_json(const FitAdvice& a) {
  return {{"fits", a.fits},
          {"settings", a.settings},
          {"peak_bytes", a.peak_bytes},
          {"samples_per_second", a.samples_per_second},
          {"planned", a.n_planned}};
}

std::string describe_advice(const FitAdvice& a, std::uint64_t memory_per_replica) {
  if (!a.fits)
    return fmt::format("nothing planned fits, {}: the least peak of the {} candidates is {} of {}",
                       a.found, a.n_planned, format_bytes(a.peak_bytes),
                       format_bytes(memory_per_replica));
  std::string sets;
  for (const auto& s : a.settings) sets += fmt::format(" --set {}", s);
  return fmt::format("fits with:{} (peak {} of {}, est. {} samples/s; {})", sets,
                     format_bytes(a.peak_bytes), format_bytes(memory_per_replica),
                     format_rate(a.samples_per_second), a.found);
}

}  // namespace popkit::planner
