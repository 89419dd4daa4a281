// Enumerating, planning and ranking the candidates of `popplan tune`.
#include "planner/tune.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/error.h"
#include "config/names.h"
#include "config/validate.h"
#include "planner/build.h"
#include "planner/estimate_check.h"
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
// Candidates at least this fraction of a row's fastest are alike: one row.
constexpr double kAlike = 0.99;
// The largest global batch split: its divisors are found in 2^20 steps.
constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 40;

// In O(sqrt n): a global batch of 2^40 has 41 divisors, found in 2^20 steps.
std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> low, high;
  for (std::int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// At most `k` of `values` (ascending), spread evenly by position, so by ratio for the
// near-geometric divisors: the first, the last and between; `keep` stays when present.
std::vector<std::int64_t> thin(const std::vector<std::int64_t>& values, std::size_t k,
                               std::int64_t keep) {
  if (values.size() <= k || k < 2) return values;
  std::set<std::int64_t> out;
  for (std::size_t i = 0; i < k; ++i) out.insert(values[i * (values.size() - 1) / (k - 1)]);
  if (std::find(values.begin(), values.end(), keep) != values.end()) out.insert(keep);
  return {out.begin(), out.end()};
}

std::string list_text(const std::vector<std::int64_t>& values) {
  return fmt::format("{}", fmt::join(values, ", "));
}

// The thresholds that shard different sets of variables: each distinct element count of
// a parameter (a variable is sharded iff nelms >= threshold). The config's own threshold
// stands for the count it shards the same variables as (512 for 1,600 when no parameter
// has 512 to 1,599 elements), so that the config itself is a candidate.
std::vector<std::int64_t> thresholds(const Config& c) {
  std::set<std::int64_t> sizes;
  for (const LayerInfo& l : model_layers(c.model))
    for (const std::int64_t n : parameter_elements(l)) sizes.insert(n);
  if (const auto same = sizes.lower_bound(c.sharding.threshold); same != sizes.end()) {
    sizes.erase(same);
    sizes.insert(c.sharding.threshold);
  }
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
    const std::vector<Split> splits = plan_splits(c);
    for (const Split& split : splits) {
      Config p = c;
      Choices s = base_choices_;
      p.replication.factor = split.replicas;
      if (split.replicas != base_.replication.factor)
        s.set("replication.factor", fmt::format("{}", split.replicas), true);
      p.pipeline.stages = split.stages;
      if (split.stages > 1 || base_.pipeline.stages > 1)
        s.set("pipeline.stages", fmt::format("{}", split.stages),
              split.stages != base_.pipeline.stages);
      if (split.stages != base_.pipeline.stages) {
        p.pipeline.placement_auto = true;
        p.pipeline.placement.clear();
        s.force("pipeline.placement", "auto", split.stages > 1 && !base_.pipeline.placement_auto);
      }
      per_replica_ = split.per_replica;
      split_ = &split;
      modes(p, s);
    }
    plan_chains();
    TuneResult result;
    result.n_planned = n_planned_;
    result.n_skipped = n_skipped_;
    result.fits = std::move(fits_);
    result.smallest = std::move(smallest_);
    result.device_profile = device_profile(base_)->name;
    result.memory_per_replica = r_.memory_per_replica;
    result.n_combinations = n_combinations_;
    result.combinations_cap = cap_;
    result.n_layers = c.model.layers.size();
    result.cap_for_layers = cap_ < r_.max_combinations;
    result.thinned = std::move(thinned_);
    result.pipelined_limit = std::move(pipelined_limit_);
    result.request_changes = base_choices_.changes;
    rank(result);
    return result;
  }

 private:
  // One way to place the model on the devices: R' replicas of S' stages, each replica
  // taking `per_replica` samples of the global batch, and the values searched for the
  // sharding group and the micro-batch.
  struct Split {
    std::int64_t stages = 1, replicas = 1, per_replica = 1;
    std::vector<std::int64_t> groups;         // sharding group sizes, > 1
    std::vector<std::int64_t> micro_batches;  // dividing per_replica
  };

  // Pipeline stages on the same devices: R x S of them (S the config's stages), split as
  // R' replicas of S' stages for every S' dividing them, up to one layer a stage, where
  // the global batch splits over the R' replicas. Validation drops the combinations
  // pipelining refuses (phased, remote optimizer state, io_overlapped, accumulation <
  // 2 S'). The search is bounded (TuneRequest::max_combinations): past it, the sharding
  // groups and micro-batches are thinned to fewer values each, evenly by ratio.
  std::vector<Split> plan_splits(const Config& c) {
    const std::int64_t replicas = r_.replicas > 0 ? r_.replicas : c.replication.factor;
    if (replicas > config::kMaxReplicationFactor)
      throw Error("--replicas {} is more than {}, the most replicas a config may have", replicas,
                  config::kMaxReplicationFactor);
    std::int64_t global = r_.global_batch;
    if (global <= 0 && (__builtin_mul_overflow(c.training.micro_batch_size,
                                               c.training.gradient_accumulation, &global) ||
                        __builtin_mul_overflow(global, c.replication.factor, &global)))
      global = kMaxGlobalBatch + 1;
    if (global > kMaxGlobalBatch)
      throw Error("the global batch {} is more than {} samples, the most popplan tune splits",
                  global, kMaxGlobalBatch);
    if (global % replicas != 0)
      throw Error("the global batch {} does not split over {} replicas", global, replicas);
    const std::int64_t devices = replicas * c.pipeline.stages;
    const auto n_layers = static_cast<std::int64_t>(c.model.layers.size());
    std::vector<Split> all;
    for (const std::int64_t stages : divisors(devices)) {
      const std::int64_t r = devices / stages;
      if (stages > n_layers || global % r != 0) continue;
      Split split{stages, r, global / r, {}, divisors(global / r)};
      if (stages > 1) limit_pipelined(c, split);
      for (const std::int64_t g : divisors(r))
        if (g > 1) split.groups.push_back(g);
      all.push_back(std::move(split));
    }
    const std::size_t n_thresholds = thresholds(c).size();
    // Execution modes and placements (6) x sharding (off, or a group and a threshold) x io
    // modes (3) x micro-batches: every combination, valid or not.
    const auto count = [&](const std::vector<Split>& splits) {
      std::size_t n = 0;
      for (const Split& x : splits)
        n += 6 * (1 + x.groups.size() * n_thresholds) * 3 * x.micro_batches.size();
      return n;
    };
    n_combinations_ = count(all);
    cap_ = tune_combinations_cap(r_.max_combinations, c.model.layers.size());
    if (n_combinations_ <= cap_) return all;
    std::size_t widest = 2;
    for (const Split& x : all) widest = std::max({widest, x.groups.size(), x.micro_batches.size()});
    for (std::size_t k = widest; k >= 2; --k) {
      std::vector<Split> thinned = all;
      for (Split& x : thinned) {
        x.groups = thin(x.groups, k, base_sharding_group());
        x.micro_batches = thin(x.micro_batches, k, c.training.micro_batch_size);
      }
      if (count(thinned) > cap_) continue;
      for (std::size_t i = 0; i < all.size(); ++i) {
        const std::string at = all.size() == 1 ? ""
                                               : fmt::format(" at {} stage(s) of {} replicas",
                                                             all[i].stages, all[i].replicas);
        if (thinned[i].micro_batches.size() < all[i].micro_batches.size())
          thinned_.push_back(fmt::format("micro-batches {} of {}{}",
                                         list_text(thinned[i].micro_batches),
                                         all[i].micro_batches.size(), at));
        if (thinned[i].groups.size() < all[i].groups.size())
          thinned_.push_back(fmt::format("sharding groups of {} of {}{}",
                                         list_text(thinned[i].groups), all[i].groups.size(), at));
      }
      return thinned;
    }
    const std::string per_layers =
        cap_ == r_.max_combinations
            ? std::string()
            : fmt::format(" for a model of {} layers ({} up to {} layers)", n_layers,
                          r_.max_combinations, kTuneFullSearchLayers);
    throw Error(
        "the search has {} combinations, {} even with 2 sharding groups and 2 micro-batches "
        "(and the config's own) for each split of the devices, more than the {} popplan tune plans "
        "at most{}; ask "
        "for fewer --replicas, or raise --max-combinations",
        n_combinations_, count([&] {
          std::vector<Split> two = all;
          for (Split& x : two) {
            x.groups = thin(x.groups, 2, base_sharding_group());
            x.micro_batches = thin(x.micro_batches, 2, c.training.micro_batch_size);
          }
          return two;
        }()),
        cap_, per_layers);
  }

  // A pipelined split's micro-batches of at most kTunePipelinedAccumulation a step, and the
  // config's own.
  void limit_pipelined(const Config& c, Split& split) {
    std::vector<std::int64_t> kept;
    for (const std::int64_t mb : split.micro_batches)
      if (split.per_replica / mb <= kTunePipelinedAccumulation ||
          (split.stages == c.pipeline.stages && mb == c.training.micro_batch_size))
        kept.push_back(mb);
    if (kept.size() == split.micro_batches.size()) return;
    pipelined_limit_.push_back(
        fmt::format("at {} stage(s) of {} replicas: micro-batches {} to {}, {} of {}", split.stages,
                    split.replicas, kept.empty() ? 0 : kept.front(), kept.empty() ? 0 : kept.back(),
                    kept.size(), split.micro_batches.size()));
    split.micro_batches = std::move(kept);
  }

  // The config's own sharding group size, kept when the groups are thinned.
  std::int64_t base_sharding_group() const {
    for (const auto& g : base_.replication.groupings)
      if (g.name == base_.sharding.grouping)
        return g.all_replicas ? base_.replication.factor : g.group_size;
    return 0;
  }

  // Fastest first; ties: less memory, then fewer changes. Candidates within 1% of a
  // row's fastest are one row (TuneCandidate::row), led by the fewest changes; so are
  // those within 1% of its lead, so the rows' leads are more than 1% apart.
  static void rank(TuneResult& result) {
    auto& fits = result.fits;
    std::stable_sort(fits.begin(), fits.end(), [](const auto& a, const auto& b) {
      if (a.samples_per_second != b.samples_per_second)
        return a.samples_per_second > b.samples_per_second;
      if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
      return a.changes.size() < b.changes.size();
    });
    // On the front: no other candidate is at least as good in both and better in one.
    // Sorted fastest first, only those before a candidate can dominate it.
    for (std::size_t i = 0; i < fits.size(); ++i) {
      const TuneCandidate& a = fits[i];
      bool dominated = false;
      for (std::size_t j = 0; j < i && !dominated; ++j) {
        const TuneCandidate& b = fits[j];
        dominated = b.peak_bytes <= a.peak_bytes && b.samples_per_second >= a.samples_per_second &&
                    (b.peak_bytes < a.peak_bytes || b.samples_per_second > a.samples_per_second);
      }
      fits[i].pareto = !dominated;
    }
    // A row: those within 1% of its fastest, then of its lead (the fewest changes, then
    // the fastest); a candidate that joins for being near the lead and has fewer changes
    // becomes the lead, and the row grows from it, until its lead has the fewest changes
    // of the row (each new lead has fewer: a few rounds at most).
    std::size_t row = 0;
    for (std::size_t first = 0; first < fits.size(); ++row) {
      const auto at = [&](std::size_t i) { return fits.begin() + static_cast<std::ptrdiff_t>(i); };
      const auto fewer = [](const auto& a, const auto& b) {
        return a.changes.size() < b.changes.size();
      };
      const auto grow = [&](std::size_t end, double speed) {
        while (end < fits.size() && fits[end].samples_per_second >= speed * kAlike) ++end;
        return end;
      };
      std::size_t end = grow(first + 1, fits[first].samples_per_second);
      auto lead = std::min_element(at(first), at(end), fewer);
      for (;;) {
        const std::size_t grown = grow(end, lead->samples_per_second);
        if (grown == end) break;
        const auto better = std::min_element(at(end), at(grown), fewer);
        end = grown;
        if (better->changes.size() >= lead->changes.size()) break;
        lead = better;
      }
      std::rotate(at(first), lead, lead + 1);
      for (std::size_t i = first; i < end; ++i) fits[i].row = row + 1;
      first = end;
    }
    result.n_rows = row;
    // The front among the rows' leads, as the rows show them.
    std::vector<TuneCandidate*> leads;
    for (std::size_t i = 0; i < fits.size(); ++i)
      if (i == 0 || fits[i].row != fits[i - 1].row) leads.push_back(&fits[i]);
    for (TuneCandidate* a : leads)
      a->row_on_front = std::none_of(leads.begin(), leads.end(), [&](const TuneCandidate* b) {
        return b->peak_bytes <= a->peak_bytes && b->samples_per_second >= a->samples_per_second &&
               (b->peak_bytes < a->peak_bytes || b->samples_per_second > a->samples_per_second);
      });
  }

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
    for (const std::int64_t g : split_->groups) {
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

  // micro-batch × accumulation = the per-replica batch: one chain, planned later
  // (plan_chains), smallest micro-batch first.
  void batch(const Config& c, const Choices& s) {
    Chain chain;
    for (const std::int64_t mb : split_->micro_batches) {
      Config m = c;
      m.training.micro_batch_size = mb;
      m.training.gradient_accumulation = per_replica_ / mb;
      Choices sb = s;
      sb.set("training.micro_batch_size", fmt::format("{}", mb),
             mb != base_.training.micro_batch_size);
      sb.set("training.gradient_accumulation", fmt::format("{}", per_replica_ / mb),
             per_replica_ / mb != base_.training.gradient_accumulation);
      chain.push_back({std::move(m), std::move(sb)});
    }
    chains_.push_back(std::move(chain));
  }

  // The candidates that differ only in the micro-batch, ascending.
  struct Pending {
    Config config;
    Choices choices;
  };
  using Chain = std::vector<Pending>;
  struct Outcome {
    TuneCandidate candidate;
    bool fits = false;
  };
  struct Planned {
    std::size_t n_planned = 0, n_skipped = 0;
    std::vector<Outcome> outcomes;  // in the chain's order
    std::exception_ptr error;
  };

  // A chain's valid candidates, smallest micro-batch first, until one does not fit: the
  // device memory grows with the micro-batch (every activation, IO slot, stash and
  // workspace has its rows), so the larger ones do not fit either and are not planned
  // (TuneRequest::every_micro_batch plans them; tune_test checks both agree).
  Planned plan_chain(Chain& chain) const {
    Planned out;
    try {
      for (std::size_t i = 0; i < chain.size(); ++i) {
        Pending& c = chain[i];
        if (config::has_errors(config::validate_config(c.config))) continue;
        ++out.n_planned;
        const Plan p = build_plan_for_estimate(c.config);
        // A profile that prices a candidate at no finite time ranks nothing.
        if (const std::string why = estimate_problem(p); !why.empty()) throw Error("{}", why);
        out.outcomes.push_back({{std::move(c.choices.settings), std::move(c.choices.changes),
                                 std::move(c.config), p.peak_bytes, p.estimated_samples_per_second},
                                p.fits});
        if (!p.fits && !r_.every_micro_batch) {
          out.n_skipped = chain.size() - i - 1;
          break;
        }
      }
    } catch (...) {
      out.error = std::current_exception();
    }
    return out;
  }

  // The chains over the machine's cores, each on one thread; the results are taken in
  // the search's order, so the ranking is the same whatever the threads.
  void plan_chains() {
    std::vector<Planned> planned(chains_.size());
    std::atomic<std::size_t> next{0};
    const auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < chains_.size();)
        planned[i] = plan_chain(chains_[i]);
    };
    {
      const std::size_t n_threads = std::clamp<std::size_t>(
          std::thread::hardware_concurrency(), 1, std::max<std::size_t>(chains_.size(), 1));
      std::vector<std::jthread> helpers;
      for (std::size_t t = 1; t < n_threads; ++t) helpers.emplace_back(work);
      work();
    }
    chains_.clear();
    for (Planned& chain : planned) {
      if (chain.error) std::rethrow_exception(chain.error);
      n_planned_ += chain.n_planned;
      n_skipped_ += chain.n_skipped;
      for (Outcome& o : chain.outcomes) {
        if (!smallest_ || o.candidate.peak_bytes < smallest_->peak_bytes) smallest_ = o.candidate;
        if (o.fits) fits_.push_back(std::move(o.candidate));
      }
    }
  }

  const Config& base_;
  const TuneRequest& r_;
  Choices base_choices_;
  std::int64_t per_replica_ = 1;
  const Split* split_ = nullptr;
  std::size_t n_combinations_ = 0;
  std::size_t cap_ = 0;
  std::vector<std::string> thinned_;
  std::vector<std::string> pipelined_limit_;
  std::vector<Chain> chains_;
  std::size_t n_planned_ = 0;
  std::size_t n_skipped_ = 0;
  std::vector<TuneCandidate> fits_;
  std::optional<TuneCandidate> smallest_;
};

}  // namespace

std::size_t tune_combinations_cap(std::size_t max_combinations, std::size_t layers) {
  if (layers <= kTuneFullSearchLayers) return max_combinations;
  // max_combinations * kTuneFullSearchLayers / layers, without overflow.
  const auto cap = static_cast<std::size_t>(static_cast<double>(max_combinations) *
                                            static_cast<double>(kTuneFullSearchLayers) /
                                            static_cast<double>(layers));
  return std::max<std::size_t>(1, std::min(cap, max_combinations));
}

TuneResult tune(const config::Config& config, const TuneRequest& request) {
  return Search(config, request).run();
}

std::uint64_t memory_per_replica(const config::Config& config) {
  return config.device.memory_per_replica != 0 ? config.device.memory_per_replica
                                               : device_profile(config)->memory_bytes;
}

}  // namespace popkit::planner
