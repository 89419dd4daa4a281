// The tuner behind `popplan tune` (issue 17 item 4): every combination of the choices a
// PopXL programmer makes for one model — pipeline stages on the same devices, execution
// mode, what is remote, the sharding threshold and sharding group size, the io mode,
// micro-batch × accumulation at the same global batch — planned and priced, keeping those that fit
// the memory per replica, fastest first, with the Pareto front of peak memory against samples/s
// marked.
//
//   TuneRequest req{900ull << 20};
//   std::vector<TuneCandidate> fits = tune(config, req);   // fits.front() is the winner
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "planner/plan.h"

namespace popkit::planner {

struct TuneRequest {
  std::uint64_t memory_per_replica = 0;  // bytes
  std::int64_t replicas = 0;             // 0: the config's replication.factor
  std::int64_t global_batch = 0;         // 0: the config's micro-batch × accumulation × replicas
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
};

struct TuneResult {
  std::vector<TuneCandidate> fits;        // fastest first; ties: less memory, then fewer changes
  std::size_t n_planned = 0;              // valid combinations planned
  std::optional<TuneCandidate> smallest;  // the least peak of all planned, fitting or not
};

// The config must be valid and carry its device profile (Config::device.resolved).
// Throws popkit::Error when the global batch does not split over the replicas.
TuneResult tune(const config::Config& config, const TuneRequest& request);

// The fit advice of `popplan plan` (issue 17 item 5): the tuner run at the config's own
// memory per replica, replication factor and global batch (what the user fixed), and
// of the candidates that fit, the one with the fewest changes to the config, then the
// fastest: the smallest edit is the one a user can check and keep, and speed decides
// between edits of the same size. When nothing fits: the candidate with the least peak.
FitAdvice advise_fit(const config::Config& config);

// Text: a table (rank, samples/s, peak, Pareto mark, settings); JSON: {"planned",
// "candidates": [{"rank", "samples_per_second", "peak_bytes", "pareto", "settings",
// "changes"}]}.
void print_tune(std::ostream& out, const TuneResult& result, bool json);

}  // namespace popkit::planner
