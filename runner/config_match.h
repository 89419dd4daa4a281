// Whether a checkpoint belongs to the config at hand. A checkpoint carries the config
// that made it (resolved_config_json, in its metadata; older ones only its hash), so a
// resume or an evaluation under another config is refused naming the keys that differ,
// not run into a number that looks like a result.
//
// A resumed run must continue the same training: the model, the loss, the initialiser,
// the optimizer, the seed, the data and the global batch (micro_batch_size x
// gradient_accumulation x replication.factor), and the variables' groups. How long it
// runs (training.steps, epochs), where tensors live and when ops run (sharding, remote,
// execution, pipeline), how the global batch is split over replicas, evaluation, the
// device and the name may change: the engine makes them bitwise equal (or, for the
// split, equal to float rounding). An evaluation is stricter: every key but the
// device's must be the same (its --force evaluates anyway).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "runner/checkpoint.h"

namespace popkit::runner {

struct ConfigDifference {
  std::string key;               // "training.optimizer.lr", or a derived figure's name
  std::string checkpoint_value;  // as JSON writes it; "(not set)" when absent
  std::string value;             // this config's
  bool decides_training = false;
  bool derived = false;  // a figure of several keys (the global batch), not a key
};

// Every leaf of two resolved configs that differs (lists of equal length item by item),
// and the derived figures a resume must keep: the global batch, the variables' groups.
std::vector<ConfigDifference> config_differences(const nlohmann::json& checkpoint_config,
                                                 const nlohmann::json& config);

// "data.dataset (fashion-mnist there, mnist here), training.seed (7 there, 8 here)".
std::string describe(const std::vector<ConfigDifference>& differences);

// --resume: throws InputRefused (exit 2) when the checkpoint at `path` was made under a
// config whose training differs from `config`'s, naming the keys; an older checkpoint
// without its config, when the hashes differ. Returns a note when the configs differ
// only in keys that leave the training as it was, else "".
std::string check_resume_config(const LoadedCheckpoint& checkpoint, const std::string& path,
                                const config::Config& config);

// poprun eval: throws popkit::Error when the checkpoint at `path` was made under another
// config (but for the device), naming the keys that differ (an older checkpoint: both
// hashes). A file without popkit metadata (weights from elsewhere) passes.
void check_eval_config(const LoadedCheckpoint& checkpoint, const std::string& path,
                       const config::Config& config);

}  // namespace popkit::runner
