// The tuner behind `popplan tune` (issue 17 item 4): every combination of the choices a
// PopXL programmer makes for one model — pipeline stages on the same devices, execution
// mode, what is remote, the sharding threshold and sharding group size, the io mode,
// micro-batch × accumulation at the same global batch — planned and priced on every core
// (but the micro-batches larger than one that does not fit), keeping those that fit the
// memory per replica, fastest first, with the Pareto front of peak memory against
// samples/s marked.
//
//   TuneRequest req{900ull << 20};
//   TuneResult r = tune(config, req);   // r.fits.front() is the winner
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "planner/plan.h"

namespace popkit::planner {

// The most combinations a search plans before it thins its dimensions (from about 2 ms a
// plan of the MNIST example to 13 ms of GPT-2 XL, over the machine's cores).
inline constexpr std::size_t kMaxTuneCombinations = 4096;
// A plan's time grows with the model's layers (about 0.1 ms a layer: 1.4 s a plan of the
// largest config's 14,000): past this many layers, the search plans fewer combinations, in
// proportion, so that tune's work stays that of a search of this many layers.
inline constexpr std::size_t kTuneFullSearchLayers = 64;

// A pipelined step's schedule lists every micro-batch of every stage (a plan of 65,536
// micro-batches takes 1.5 s and 600 MB): pipelined splits are searched at micro-batches of
// at most this many a step (the config's own kept), where the bubble is under 0.2% a stage.
inline constexpr std::int64_t kTunePipelinedAccumulation = 1024;

// The combinations a search of a model of `layers` layers plans at most:
// max_combinations, times kTuneFullSearchLayers / layers past that many (at least 1).
std::size_t tune_combinations_cap(std::size_t max_combinations, std::size_t layers);

struct TuneRequest {
  std::uint64_t memory_per_replica = 0;  // bytes
  std::int64_t replicas = 0;             // 0: the config's replication.factor
  std::int64_t global_batch = 0;         // 0: the config's micro-batch × accumulation × replicas
  // Past this many combinations (valid or not; fewer for a model of more than
  // kTuneFullSearchLayers layers: tune_combinations_cap), the sharding groups and
  // micro-batches searched are thinned, each to fewer values spread evenly by ratio (the
  // config's own kept), until the search fits; when even 2 of each do not, tune throws.
  std::size_t max_combinations = kMaxTuneCombinations;
  // Plans every micro-batch. By default, of the candidates that differ only in the
  // micro-batch, those larger than one that does not fit are not planned: memory grows
  // with the micro-batch, so they do not fit either (TuneResult::n_skipped).
  bool every_micro_batch = false;
};

struct TuneCandidate {
  // The choices made, as `--set` arguments: "execution.mode=phased", ...; applied to the
  // config's file they give `config`.
  std::vector<std::string> settings;
  // Those of `settings` whose value differs from the config's, and the values the tuner
  // had to set to make a choice (a grouping to shard over, io_tiles for an io mode, the
  // memory per replica when the request changes it): the edit that turns the config
  // into this candidate.
  std::vector<std::string> changes;
  config::Config config;
  std::uint64_t peak_bytes = 0;
  double samples_per_second = 0.0;
  bool pareto = false;  // no other candidate has less or equal peak and more samples/s
  std::size_t row = 0;  // 1-based: the row of alike candidates it is shown in
  // A row's lead only: no other row's lead has less or equal peak and more samples/s.
  bool row_on_front = false;
};

struct TuneResult {
  // By row: a row holds the candidates within 1% of its fastest, led by the one with the
  // fewest changes to the config (then the fastest), the others fastest first; rows
  // fastest first. fits.front() is the winner.
  std::vector<TuneCandidate> fits;
  std::size_t n_rows = 0;
  std::size_t n_planned = 0;         // valid combinations planned
  std::size_t n_skipped = 0;         // larger micro-batches than one that did not fit
  std::size_t n_combinations = 0;    // all combinations, valid or not, before thinning
  std::size_t combinations_cap = 0;  // the most it would plan (tune_combinations_cap)
  std::size_t n_layers = 0;          // the model's
  bool cap_for_layers = false;       // the cap is below max_combinations: a big model
  std::vector<std::string> thinned;  // "micro-batches 1, 32, 1024 of 11", when thinned
  // "at 2 stage(s) of 8 replicas: micro-batches 64 to 65536, 11 of 21", when pipelined
  // splits left out micro-batches of more than kTunePipelinedAccumulation a step.
  std::vector<std::string> pipelined_limit;
  std::optional<TuneCandidate> smallest;     // the least peak of all planned, fitting or not
  std::string device_profile;                // the profile the candidates are ranked for
  std::uint64_t memory_per_replica = 0;      // what they fit
  std::vector<std::string> request_changes;  // every candidate's changes: the request's own
  // When nothing fits: what does, planned (fit_advice.h's advise_beyond_tune; popplan
  // tune asks for it).
  std::optional<FitAdvice> advice;
};

// The config must be valid and carry its device profile (Config::device.resolved).
// Throws popkit::Error when the global batch does not split over the replicas.
TuneResult tune(const config::Config& config, const TuneRequest& request);

// The device memory a plan of `config` must fit: the config's, or its profile's.
std::uint64_t memory_per_replica(const config::Config& config);

// Text: what the candidates are ranked for, then a table of rows (rank, samples/s, peak,
// Pareto mark, how many candidates the row stands for, the changes to the config),
// wrapped to 100 columns; JSON: {"device_profile", "memory_per_replica", "planned",
// "skipped", "combinations", "thinned", "pipelined_limit", "candidates": [{"rank" (the row),
// "samples_per_second", "peak_bytes", "pareto", "settings", "changes"}], and "advice" (as
// fit_advice_json) when the result holds it}. Text shows the first
// `top` rows (0: all) and says how many more there are; JSON has every candidate.
void print_tune(std::ostream& out, const TuneResult& result, bool json, std::size_t top = 0);

}  // namespace popkit::planner
