// The key table; see keys.h.
#include "config/yaml/keys.h"

#include <algorithm>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"

namespace popkit::config {
namespace {

// A section whose keys depend on a kind: its own keys, then every kind's (the kind
// tables, config/layer_kinds.h and config/optimizer_kinds.h).
std::vector<std::string> with_kind_keys(std::vector<std::string> keys,
                                        const std::vector<std::string_view>& kind_keys) {
  keys.insert(keys.end(), kind_keys.begin(), kind_keys.end());
  return keys;
}

std::vector<std::string> optimizer_keys() {
  std::vector<std::string> keys{"type"};
  for (const auto key : common_optimizer_keys()) keys.emplace_back(key);
  return keys;
}

}  // namespace

const std::vector<Section>& sections() {
  static const std::vector<Section> kSections{
      {"",
       {"version", "name", "model", "replication", "variables", "sharding", "remote", "execution",
        "pipeline", "training", "data", "eval", "device"}},
      {"model", {"input_shape", "layers", "loss", "init", "init_from"}},
      {"model.layers[]", with_kind_keys({"name", "type"}, layer_kind_keys())},
      {"model.init", {"weights", "biases", "seed"}},
      {"model.init.weights", {"normal"}},
      {"model.init.weights.normal", {"mean", "std"}},
      {"replication", {"factor", "groupings"}},
      {"replication.groupings.*", {"group_size", "stride"}},
      {"variables", {"grouping", "retrieval_mode"}},
      {"sharding", {"enabled", "threshold", "grouping", "weights", "optimizer_state"}},
      {"remote", {"weights", "optimizer_state"}},
      {"execution", {"mode", "phases", "io_mode", "io_tiles", "io_schedule", "sync_pattern"}},
      {"pipeline", {"stages", "placement"}},
      {"training",
       {"micro_batch_size", "gradient_accumulation", "epochs", "steps", "optimizer", "seed"}},
      {"training.optimizer", with_kind_keys(optimizer_keys(), optimizer_kind_keys())},
      {"data",
       {"dataset", "shuffle", "normalize_mean", "normalize_std", "dir", "train_images",
        "train_labels", "test_images", "test_labels", "synthetic_train", "synthetic_test",
        "synthetic_noise", "path", "sequence_length", "validation_fraction"}},
      {"eval", {"micro_batch_size", "every"}},
      {"device", {"profile", "memory_per_replica"}},
  };
  return kSections;
}

const std::vector<std::string>& section_keys(std::string_view section_path) {
  for (const auto& section : sections()) {
    if (section.path == section_path) return section.keys;
  }
  assertion_failed("section_keys: unknown config section", __FILE__, __LINE__);
}

std::vector<std::string> accepted_key_paths() {
  std::vector<std::string> out;
  for (const auto& section : sections()) {
    for (const auto& key : section.keys) {
      out.push_back(section.path.empty() ? key : std::string(section.path) + "." + key);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace popkit::config
