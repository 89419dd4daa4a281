// Enumerating, planning and ranking the candidates of `popplan tune`.
#include "planner/tune.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "config/names.h"
#include "config/validate.h"
#include "planner/build.h"
#include "planner/plan_text.h"

namespace popkit::planner {
namespace {

using config::Config;
using config::ExecutionMode;
using config::IoMode;

// io_tiles for io modes when the config gives none (PopXL's examples use 32).
constexpr std::int64_t kDefaultIoTiles = 32;

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// The thresholds that shard different sets of variables: each distinct element count of
// a weight or bias (a variable is sharded iff nelms >= threshold).
std::vector<std::int64_t> thresholds(const Config& c) {
  std::set<std::int64_t> sizes;
  std::int64_t in = 1;
  for (const auto d : c.model.input_shape) in *= d;
  for (const auto& l : c.model.layers) {
    if (l.type == config::LayerType::kLinear) {
      sizes.insert(in * l.out_features);
      sizes.insert(l.out_features);
    }
    in = l.out_features;
  }
  return {sizes.begin(), sizes.end()};
}

class Search {
 public:
  Search(const Config& base, const TuneRequest& r) : base_(base), r_(r) {}

  TuneResult run() {
    Config c = base_;
    c.device.memory_per_replica = r_.memory_per_replica;
    const std::int64_t replicas = r_.replicas > 0 ? r_.replicas : c.replication.factor;
    const std::int64_t global =
        r_.global_batch > 0
            ? r_.global_batch
            : c.training.micro_batch_size * c.training.gradient_accumulation * c.replication.factor;
    if (global % replicas != 0)
      throw Error("the global batch {} does not split over {} replicas", global, replicas);
    if (replicas != c.replication.factor) {
      c.replication.factor = replicas;
      base_settings_.push_back(fmt::format("replication.factor={}", replicas));
    }
    per_replica_ = global / replicas;
    for (const ExecutionMode mode : {ExecutionMode::kStandard, ExecutionMode::kPhased})
      for (const bool remote_weights : {false, true})
        for (const bool remote_state : {false, true}) {
          // Standard mode keeps the weights on device (DESIGN.md, "The plan").
          if (mode == ExecutionMode::kStandard && remote_weights) continue;
          Config m = c;
          m.execution.mode = mode;
          m.execution.phases_auto = true;
          m.remote.weights = remote_weights;
          m.remote.optimizer_state = remote_state;
          std::vector<std::string> s = base_settings_;
          s.push_back(fmt::format("execution.mode={}", popkit::enum_name(mode)));
          s.push_back(fmt::format("remote.weights={}", remote_weights));
          s.push_back(fmt::format("remote.optimizer_state={}", remote_state));
          sharding(m, s);
        }
    TuneResult result;
    result.n_planned = n_planned_;
    result.fits = std::move(fits_);
    std::stable_sort(result.fits.begin(), result.fits.end(), [](const auto& a, const auto& b) {
      return a.samples_per_second != b.samples_per_second
                 ? a.samples_per_second > b.samples_per_second
                 : a.peak_bytes < b.peak_bytes;
    });
    // On the front: no other candidate is at least as good in both and better in one.
    // Sorted fastest first, only those before a candidate can dominate it.
    for (std::size_t i = 0; i < result.fits.size(); ++i) {
      const TuneCandidate& a = result.fits[i];
      bool dominated = false;
      for (std::size_t j = 0; j < i && !dominated; ++j) {
        const TuneCandidate& b = result.fits[j];
        dominated = b.peak_bytes <= a.peak_bytes && b.samples_per_second >= a.samples_per_second &&
                    (b.peak_bytes < a.peak_bytes || b.samples_per_second > a.samples_per_second);
      }
      result.fits[i].pareto = !dominated;
    }
    return result;
  }

 private:
  // Off, or on over a group of G replicas (G > 1 dividing R, stride 1) from each
  // threshold.
  void sharding(const Config& c, const std::vector<std::string>& s) {
    Config off = c;
    off.sharding.enabled = false;
    std::vector<std::string> s_off = s;
    s_off.push_back("sharding.enabled=false");
    io(off, s_off);
    if (c.replication.factor < 2) return;
    for (const std::int64_t g : divisors(c.replication.factor)) {
      if (g < 2) continue;
      for (const std::int64_t t : thresholds(c)) {
        Config on = c;
        on.sharding.enabled = true;
        on.sharding.weights = true;
        on.sharding.optimizer_state = true;
        on.sharding.threshold = t;
        const std::string name = fmt::format("tune_g{}", g);
        on.replication.groupings.push_back({name, g, 1, false});
        on.sharding.grouping = name;
        std::vector<std::string> s_on = s;
        s_on.push_back(
            fmt::format("replication.groupings.{}={{group_size: {}, stride: 1}}", name, g));
        s_on.push_back(fmt::format("sharding.grouping={}", name));
        s_on.push_back(fmt::format("sharding.threshold={}", t));
        io(on, s_on);
      }
    }
  }

  void io(const Config& c, const std::vector<std::string>& s) {
    for (const IoMode mode : {IoMode::kCompute, IoMode::kIo, IoMode::kIoOverlapped}) {
      Config m = c;
      m.execution.io_mode = mode;
      std::vector<std::string> si = s;
      si.push_back(fmt::format("execution.io_mode={}", popkit::enum_name(mode)));
      if (mode != IoMode::kCompute && m.execution.io_tiles == 0) {
        m.execution.io_tiles = kDefaultIoTiles;
        si.push_back(fmt::format("execution.io_tiles={}", kDefaultIoTiles));
      }
      batch(m, si);
    }
  }

  // micro-batch × accumulation = the per-replica batch.
  void batch(const Config& c, const std::vector<std::string>& s) {
    for (const std::int64_t mb : divisors(per_replica_)) {
      Config m = c;
      m.training.micro_batch_size = mb;
      m.training.gradient_accumulation = per_replica_ / mb;
      std::vector<std::string> sb = s;
      sb.push_back(fmt::format("training.micro_batch_size={}", mb));
      sb.push_back(fmt::format("training.gradient_accumulation={}", per_replica_ / mb));
      plan(std::move(m), std::move(sb));
    }
  }

  void plan(Config c, std::vector<std::string> settings) {
    if (config::has_errors(config::validate_config(c))) return;
    ++n_planned_;
    const Plan p = build_plan_for_estimate(c);
    if (!p.fits) return;
    fits_.push_back(
        {std::move(settings), std::move(c), p.peak_bytes, p.estimated_samples_per_second, false});
  }

  const Config& base_;
  const TuneRequest& r_;
  std::vector<std::string> base_settings_;
  std::int64_t per_replica_ = 1;
  std::size_t n_planned_ = 0;
  std::vector<TuneCandidate> fits_;
};

}  // namespace

TuneResult tune(const config::Config& config, const TuneRequest& request) {
  return Search(config, request).run();
}

void print_tune(std::ostream& out, const TuneResult& r, bool json) {
  if (json) {
    nlohmann::ordered_json j;
    j["planned"] = r.n_planned;
    j["candidates"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < r.fits.size(); ++i)
      j["candidates"].push_back({{"rank", i + 1},
                                 {"samples_per_second", r.fits[i].samples_per_second},
                                 {"peak_bytes", r.fits[i].peak_bytes},
                                 {"pareto", r.fits[i].pareto},
                                 {"settings", r.fits[i].settings}});
    out << j.dump(1) << '\n';
    return;
  }
  fmt::print(out,
             "{} of {} candidates fit; * marks the Pareto front of peak memory against "
             "samples/s\n",
             r.fits.size(), r.n_planned);
  fmt::print(out, "{:>5}  {:>12}  {:>11}     {}\n", "Rank", "Samples/s", "Peak", "Settings");
  for (std::size_t i = 0; i < r.fits.size(); ++i) {
    const TuneCandidate& f = r.fits[i];
    std::string settings;
    for (const auto& s : f.settings) settings += (settings.empty() ? "" : " ") + s;
    fmt::print(out, "{:>5}  {:>12.0f}  {:>11}  {}  {}\n", i + 1, f.samples_per_second,
               format_bytes(f.peak_bytes), f.pareto ? "*" : " ", settings);
  }
}

}  // namespace popkit::planner
