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
#include "planner/layer_kinds.h"
#include "planner/layer_ops.h"
#include "planner/layers.h"
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
// a parameter (a variable is sharded iff nelms >= threshold).
std::vector<std::int64_t> thresholds(const Config& c) {
  std::set<std::int64_t> sizes;
  for (const LayerInfo& l : model_layers(c.model))
    for (const std::int64_t n : parameter_elements(l)) sizes.insert(n);
  return {sizes.begin(), sizes.end()};
}

// The choices of one candidate so far, as `--set` arguments: all of them, and those that
// differ from the config (what --write and the fit advice change).
struct Choices {
  std::vector<std::string> settings;
  std::vector<std::string> changes;

  void set(const std::string& key, const std::string& value, bool changed) {
    const std::string s = fmt::format("{}={}", key, value);
    settings.push_back(s);
    if (changed) changes.push_back(s);
  }
  // A value the tuner forces beyond its dimensions: listed only when it changes something.
  void force(const std::string& key, const std::string& value, bool changed) {
    if (changed) set(key, value, true);
  }
};

// The device memory a plan of `c` must fit: the config's, or its profile's.
std::uint64_t memory_per_replica(const Config& c) {
  return c.device.memory_per_replica != 0 ? c.device.memory_per_replica
                                          : device_profile(c)->memory_bytes;
}

// Bytes as the config writes them, exactly: "900MiB", "1536KiB", "1000" (bytes).
std::string exact_bytes(std::uint64_t bytes) {
  for (const auto& [shift, unit] : {std::pair{30, "GiB"}, {20, "MiB"}, {10, "KiB"}})
    if (bytes != 0 && bytes % (1ull << shift) == 0)
      return fmt::format("{}{}", bytes >> shift, unit);
  return fmt::format("{}", bytes);
}

class Search {
 public:
  Search(const Config& base, const TuneRequest& r) : base_(base), r_(r) {}

  TuneResult run() {
    Config c = base_;
    c.device.memory_per_replica = r_.memory_per_replica;
    if (r_.memory_per_replica != memory_per_replica(base_))
      base_choices_.set("device.memory_per_replica", exact_bytes(r_.memory_per_replica), true);
    const std::int64_t replicas = r_.replicas > 0 ? r_.replicas : c.replication.factor;
    const std::int64_t global =
        r_.global_batch > 0
            ? r_.global_batch
            : c.training.micro_batch_size * c.training.gradient_accumulation * c.replication.factor;
    if (global % replicas != 0)
      throw Error("the global batch {} does not split over {} replicas", global, replicas);
    // Pipeline stages on the same devices: R x S of them (S the config's stages), split
    // as R' replicas of S' stages for every S' dividing them, up to one layer a stage,
    // where the global batch splits over the R' replicas. Validation drops the
    // combinations pipelining refuses (phased, remote optimizer state, io_overlapped,
    // accumulation < 2 S').
    const std::int64_t devices = replicas * c.pipeline.stages;
    const auto n_layers = static_cast<std::int64_t>(c.model.layers.size());
    for (const std::int64_t stages : divisors(devices)) {
      const std::int64_t r = devices / stages;
      if (stages > n_layers || global % r != 0) continue;
      Config p = c;
      Choices s = base_choices_;
      p.replication.factor = r;
      if (r != base_.replication.factor) s.set("replication.factor", fmt::format("{}", r), true);
      p.pipeline.stages = stages;
      if (stages > 1 || base_.pipeline.stages > 1)
        s.set("pipeline.stages", fmt::format("{}", stages), stages != base_.pipeline.stages);
      if (stages != base_.pipeline.stages) {
        p.pipeline.placement_auto = true;
        p.pipeline.placement.clear();
        s.force("pipeline.placement", "auto", stages > 1 && !base_.pipeline.placement_auto);
      }
      per_replica_ = global / r;
      modes(p, s);
    }
    TuneResult result;
    result.n_planned = n_planned_;
    result.fits = std::move(fits_);
    result.smallest = std::move(smallest_);
    // Ties: less memory, then fewer changes to the config.
    std::stable_sort(result.fits.begin(), result.fits.end(), [](const auto& a, const auto& b) {
      if (a.samples_per_second != b.samples_per_second)
        return a.samples_per_second > b.samples_per_second;
      if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
      return a.changes.size() < b.changes.size();
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
  // Execution mode and what is remote.
  void modes(const Config& c, const Choices& base) {
    for (const ExecutionMode mode : {ExecutionMode::kStandard, ExecutionMode::kPhased})
      for (const bool remote_weights : {false, true})
        for (const bool remote_state : {false, true}) {
          // Standard mode keeps the weights on device (DESIGN.md, "The plan").
          if (mode == ExecutionMode::kStandard && remote_weights) continue;
          Config m = c;
          m.execution.mode = mode;
          m.execution.phases_auto = true;
          m.execution.phases.clear();
          m.remote.weights = remote_weights;
          m.remote.optimizer_state = remote_state;
          Choices s = base;
          s.set("execution.mode", std::string(popkit::enum_name(mode)),
                mode != base_.execution.mode);
          s.force("execution.phases", "auto", !base_.execution.phases_auto);
          s.set("remote.weights", fmt::format("{}", remote_weights),
                remote_weights != base_.remote.weights);
          s.set("remote.optimizer_state", fmt::format("{}", remote_state),
                remote_state != base_.remote.optimizer_state);
          sharding(m, s);
        }
  }

  // Off, or on over a group of G replicas (G > 1 dividing R, stride 1) from each
  // threshold; a grouping of the config with that shape is used by its name.
  void sharding(const Config& c, const Choices& s) {
    Config off = c;
    off.sharding.enabled = false;
    Choices s_off = s;
    s_off.set("sharding.enabled", "false", base_.sharding.enabled);
    io(off, s_off);
    const std::int64_t r = c.replication.factor;
    if (r < 2) return;
    for (const std::int64_t g : divisors(r)) {
      if (g < 2) continue;
      for (const std::int64_t t : thresholds(c)) {
        Config on = c;
        Choices s_on = s;
        on.sharding.enabled = true;
        s_on.set("sharding.enabled", "true", !base_.sharding.enabled);
        on.sharding.weights = true;
        s_on.force("sharding.weights", "true", !base_.sharding.weights);
        on.sharding.optimizer_state = true;
        s_on.force("sharding.optimizer_state", "true", !base_.sharding.optimizer_state);
        const auto same = std::find_if(
            c.replication.groupings.begin(), c.replication.groupings.end(), [&](const auto& x) {
              return (x.all_replicas ? r : x.group_size) == g && x.stride == 1;
            });
        std::string name = fmt::format("tune_g{}", g);
        if (same != c.replication.groupings.end()) {
          name = same->name;
        } else {
          on.replication.groupings.push_back({name, g, 1, false});
          s_on.set(fmt::format("replication.groupings.{}", name),
                   fmt::format("{{group_size: {}, stride: 1}}", g), true);
        }
        on.sharding.grouping = name;
        s_on.set("sharding.grouping", name, base_.sharding.grouping != name);
        on.sharding.threshold = t;
        s_on.set("sharding.threshold", fmt::format("{}", t), base_.sharding.threshold != t);
        io(on, s_on);
      }
    }
  }

  void io(const Config& c, const Choices& s) {
    for (const IoMode mode : {IoMode::kCompute, IoMode::kIo, IoMode::kIoOverlapped}) {
      Config m = c;
      m.execution.io_mode = mode;
      Choices si = s;
      si.set("execution.io_mode", std::string(popkit::enum_name(mode)),
             mode != base_.execution.io_mode);
      if (mode != IoMode::kCompute && m.execution.io_tiles == 0) {
        m.execution.io_tiles = kDefaultIoTiles;
        si.set("execution.io_tiles", fmt::format("{}", kDefaultIoTiles), true);
      }
      batch(m, si);
    }
  }

  // micro-batch × accumulation = the per-replica batch.
  void batch(const Config& c, const Choices& s) {
    for (const std::int64_t mb : divisors(per_replica_)) {
      Config m = c;
      m.training.micro_batch_size = mb;
      m.training.gradient_accumulation = per_replica_ / mb;
      Choices sb = s;
      sb.set("training.micro_batch_size", fmt::format("{}", mb),
             mb != base_.training.micro_batch_size);
      sb.set("training.gradient_accumulation", fmt::format("{}", per_replica_ / mb),
             per_replica_ / mb != base_.training.gradient_accumulation);
      plan(std::move(m), std::move(sb));
    }
  }

  void plan(Config c, Choices choices) {
    if (config::has_errors(config::validate_config(c))) return;
    ++n_planned_;
    const Plan p = build_plan_for_estimate(c);
    TuneCandidate candidate{std::move(choices.settings),
                            std::move(choices.changes),
                            std::move(c),
                            p.peak_bytes,
                            p.estimated_samples_per_second,
                            false};
    if (!smallest_ || p.peak_bytes < smallest_->peak_bytes) smallest_ = candidate;
    if (p.fits) fits_.push_back(std::move(candidate));
  }

  const Config& base_;
  const TuneRequest& r_;
  Choices base_choices_;
  std::int64_t per_replica_ = 1;
  std::size_t n_planned_ = 0;
  std::vector<TuneCandidate> fits_;
  std::optional<TuneCandidate> smallest_;
};

}  // namespace

TuneResult tune(const config::Config& config, const TuneRequest& request) {
  return Search(config, request).run();
}

FitAdvice advise_fit(const config::Config& config) {
  const TuneResult r = tune(config, {memory_per_replica(config)});
  FitAdvice advice;
  advice.n_planned = r.n_planned;
  const TuneCandidate* best = nullptr;
  for (const TuneCandidate& c : r.fits)  // fastest first: the first of the fewest changes
    if (!best || c.changes.size() < best->changes.size()) best = &c;
  advice.fits = best != nullptr;
  if (!best && r.smallest) best = &*r.smallest;
  if (best) {
    advice.settings = best->changes;
    advice.peak_bytes = best->peak_bytes;
    advice.samples_per_second = best->samples_per_second;
  }
  return advice;
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
                                 {"settings", r.fits[i].settings},
                                 {"changes", r.fits[i].changes}});
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
