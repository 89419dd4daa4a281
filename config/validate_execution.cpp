// The rules of execution: the mode and its io tiles, explicit phases, pipelining's
// placement and stages, and the sync pattern against the devices (validate_checker.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "config/device_profile.h"
#include "config/layer_kinds.h"
#include "config/names.h"
#include "config/validate_checker.h"

namespace popkit::config {

void Checker::check_execution() {
  Execution& e = c_.execution;
  at_least("execution.io_tiles", e.io_tiles, 0);
  if (ok("execution.io_mode") && ok("execution.io_tiles")) {
    const std::string_view mode = enum_name(e.io_mode);
    if (e.io_mode != IoMode::kCompute && e.io_tiles == 0) {
      error(l_.written("execution.io_tiles") ? "execution.io_tiles" : "execution.io_mode",
            fmt::format("io_mode {} needs io_tiles > 0 (the tiles set aside for IO), got 0", mode));
    } else if (e.io_mode == IoMode::kCompute && e.io_tiles > 0) {
      warning("execution.io_tiles",
              fmt::format("io_tiles {} is ignored with io_mode compute", e.io_tiles));
    }
  }
  if (e.io_schedule == IoSchedule::kPreload && ok("execution.io_schedule") &&
      ok("execution.mode") && ok("remote.weights")) {
    if (e.mode == ExecutionMode::kStandard) {
      error("execution.io_schedule",
            "preload loads the next phase's weights during the current phase, so it needs "
            "execution.mode: phased; standard mode runs one phase");
    } else if (!c_.remote.weights) {
      warning("execution.io_schedule",
              "preload is ignored without remote.weights: true (the weights stay on device, "
              "nothing is loaded)");
    }
  }
  if (e.phases_auto || !ok("execution.phases")) return;
  if (e.mode == ExecutionMode::kStandard && ok("execution.mode")) {
    error("execution.phases",
          "explicit phases need execution.mode: phased; standard mode runs "
          "one phase");
    return;
  }
  check_phases();
}

void Checker::check_phases() {
  const Execution& e = c_.execution;
  const auto& layers = c_.model.layers;
  if (e.phases.empty()) {
    error("execution.phases", "needs at least one phase (or write auto)");
    return;
  }
  if (!ok("model.layers") || layers.empty()) return;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (!ok(fmt::format("model.layers[{}].name", i))) return;
  }
  std::vector<std::string> names;
  for (const auto& layer : layers) names.push_back(layer.name);
  const std::set<std::string> known(names.begin(), names.end());
  struct Seen {
    std::size_t phase, index, order;
  };
  std::map<std::pair<std::string, Pass>, Seen> seen;
  bool complete = true;
  std::size_t order = 0;
  for (std::size_t p = 0; p < e.phases.size(); ++p) {
    const std::string phase_path = fmt::format("execution.phases[{}]", p);
    if (e.phases[p].empty()) {
      error(phase_path, "a phase needs at least one item");
      complete = false;
    }
    for (std::size_t i = 0; i < e.phases[p].size(); ++i, ++order) {
      const PhaseItem& item = e.phases[p][i];
      const std::string path = fmt::format("{}[{}]", phase_path, i);
      if (!known.count(item.layer)) {
        error(path,
              fmt::format("no layer named '{}'{}", item.layer, did_you_mean(item.layer, names)));
        complete = false;
        continue;
      }
      const auto [it, inserted] = seen.emplace(std::pair{item.layer, item.pass}, Seen{p, i, order});
      if (!inserted) {
        error(path,
              fmt::format("{}.{} appears twice (first at execution.phases[{}][{}]); "
                          "each layer's forward and backward run exactly once",
                          item.layer, enum_name(item.pass), it->second.phase, it->second.index));
        complete = false;
      }
    }
  }
  for (const auto& name : names) {
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      if (!seen.count({name, pass})) {
        error("execution.phases",
              fmt::format("{}.{} is missing; every layer's forward and backward must appear "
                          "exactly once",
                          name, enum_name(pass)));
        complete = false;
      }
    }
  }
  if (!complete) return;
  auto item_path = [](const Seen& s) {
    return fmt::format("execution.phases[{}][{}]", s.phase, s.index);
  };
  for (std::size_t i = 1; i < names.size(); ++i) {
    const Seen& fwd = seen.at({names[i], Pass::kForward});
    const Seen& prev = seen.at({names[i - 1], Pass::kForward});
    if (fwd.order < prev.order) {
      error(item_path(fwd), fmt::format("{}.forward runs before {}.forward; forwards run in "
                                        "layer order",
                                        names[i], names[i - 1]));
    }
    const Seen& bwd = seen.at({names[i - 1], Pass::kBackward});
    const Seen& next = seen.at({names[i], Pass::kBackward});
    if (bwd.order < next.order) {
      error(item_path(bwd), fmt::format("{}.backward runs before {}.backward; backwards run "
                                        "in reverse layer order",
                                        names[i - 1], names[i]));
    }
  }
  const std::string& last = names.back();
  const Seen& fwd = seen.at({last, Pass::kForward});
  const Seen& bwd = seen.at({last, Pass::kBackward});
  if (bwd.phase != fwd.phase || bwd.order != fwd.order + 1) {
    error(item_path(bwd), fmt::format("{0}.backward must directly follow {0}.forward in the "
                                      "same phase (the last layer's forward, loss and "
                                      "backward run together)",
                                      last));
  }
}

void Checker::check_pipeline() {
  Pipeline& p = c_.pipeline;
  const auto& layers = c_.model.layers;
  const auto n_layers = static_cast<std::int64_t>(layers.size());
  if (!p.placement_auto && ok("pipeline.placement") && ok("model.layers")) {
    const auto placed = static_cast<std::int64_t>(p.placement.size());
    if (placed == 0) {
      error("pipeline.placement", "needs at least one stage (or write auto)");
      return;
    }
    if (l_.written("pipeline.stages") && ok("pipeline.stages") && p.stages != placed) {
      error("pipeline.stages",
            fmt::format("is {} but pipeline.placement lists {} stages", p.stages, placed));
      return;
    }
    p.stages = placed;
    if (!check_placement()) return;
  }
  if (!at_least("pipeline.stages", p.stages, 1) || !ok("model.layers") || n_layers == 0) return;
  if (p.stages > n_layers) {
    error("pipeline.stages",
          fmt::format("{} stages but model.layers has {} layer{}; each stage needs at least one",
                      p.stages, n_layers, n_layers == 1 ? "" : "s"));
    return;
  }
  if (p.enabled()) {
    if (c_.execution.mode == ExecutionMode::kPhased && ok("execution.mode")) {
      error("pipeline.stages",
            fmt::format("{} pipeline stages need execution.mode: standard; phased execution "
                        "already spreads the layers over time on one device, and phases "
                        "inside stages are not supported (docs/pipelining.md)",
                        p.stages));
    }
    if (c_.execution.io_mode == IoMode::kIoOverlapped && ok("execution.io_mode")) {
      error("execution.io_mode",
            "io_overlapped double-buffers the streams of a repeat loop, and a pipelined "
            "stage runs its micro-batches unrolled in 1F1B order, without one; use io or "
            "compute");
    }
    if (c_.remote.optimizer_state && ok("remote.optimizer_state")) {
      error("remote.optimizer_state",
            "pipeline stages keep their optimizer state on their own devices; remote "
            "optimizer state with pipeline.stages > 1 is not supported yet");
    }
    const std::string rule =
        pipeline_accumulation_rule(p.stages, c_.training.gradient_accumulation);
    if (!rule.empty() && ok("training.gradient_accumulation")) {
      error(l_.written("training.gradient_accumulation") ? "training.gradient_accumulation"
                                                         : "pipeline.stages",
            rule);
    }
  }
  check_sync_pattern();
}

bool Checker::check_placement() {
  const auto& layers = c_.model.layers;
  std::vector<std::string> names;
  for (const auto& l : layers) names.push_back(l.name);
  std::map<std::string, std::string> placed_at;  // layer -> its path
  std::size_t next = 0;                          // the layer model order expects next
  bool good = true;
  for (std::size_t s = 0; s < c_.pipeline.placement.size(); ++s) {
    const auto& stage = c_.pipeline.placement[s];
    const std::string stage_path = fmt::format("pipeline.placement[{}]", s);
    if (stage.empty()) {
      error(stage_path, "a stage needs at least one layer");
      good = false;
    }
    for (std::size_t i = 0; i < stage.size(); ++i) {
      const std::string path = fmt::format("{}[{}]", stage_path, i);
      const std::string& name = stage[i];
      const auto at = std::find(names.begin(), names.end(), name);
      if (at == names.end()) {
        error(path, fmt::format("unknown layer '{}'{}", name, did_you_mean(name, names)));
        good = false;
        continue;
      }
      if (const auto seen = placed_at.find(name); seen != placed_at.end()) {
        error(path, fmt::format("{} is placed twice (first at {}); every layer goes on "
                                "exactly one stage",
                                name, seen->second));
        good = false;
        continue;
      }
      placed_at.emplace(name, path);
      const auto index = static_cast<std::size_t>(at - names.begin());
      if (good && index != next) {
        error(path, fmt::format("{} is placed where model.layers has {}; a placement lists "
                                "the layers in model order, each stage a contiguous run "
                                "(the activations flow from stage to stage)",
                                name, next < names.size() ? names[next] : name));
        good = false;
      }
      next = index + 1;
    }
  }
  if (!good) return false;
  std::vector<std::string> missing;
  for (const auto& name : names)
    if (!placed_at.count(name)) missing.push_back(name);
  if (!missing.empty()) {
    error("pipeline.placement",
          fmt::format("{} {} not placed; every layer goes on exactly one stage",
                      fmt::join(missing, ", "), missing.size() == 1 ? "is" : "are"));
    return false;
  }
  return true;
}

void Checker::check_sync_pattern() {
  const auto& written = c_.execution.sync_pattern;
  if (!written || !ok("execution.sync_pattern") || !factor_ok_) return;
  const std::int64_t devices = c_.replication.factor * c_.pipeline.stages;
  if (*written == SyncPattern::kSinglePipeline && c_.replication.factor > 1) {
    error("execution.sync_pattern",
          fmt::format("single_pipeline serves one pipeline, whose devices do their host IO "
                      "without waiting for each other; replication.factor {} runs {} "
                      "pipelines, whose replicas sync at every collective: use full or "
                      "replica_and_ladder",
                      c_.replication.factor, c_.replication.factor));
  } else if (*written == SyncPattern::kReplicaAndLadder && devices % 2 != 0 && devices > 1) {
    error("execution.sync_pattern",
          fmt::format("replica_and_ladder alternates IO between two equal ladder sets (the "
                      "even and the odd devices), and replication.factor {} x {} stage{} "
                      "= {} devices do not split in two; use full, or an even device count",
                      c_.replication.factor, c_.pipeline.stages, c_.pipeline.stages == 1 ? "" : "s",
                      devices));
  }
}

}  // namespace popkit::config
