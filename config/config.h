// The typed model of a popkit config (schema version 1, see DESIGN.md "The config").
// Plain structs with the defaults the schema documents; no YAML types appear here, so
// the planner and the engine can build a Config in code. `config/yaml/load.h` fills one
// from YAML and `config/validate.h` checks it; a Config that passed validation
// satisfies every rule listed beside its fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/attributes.h"
#include "config/device_profile.h"

namespace popkit::config {

inline constexpr int kSchemaVersion = 1;

// The file a run folder holds its resolved config in (runner/resolved_config.h); every
// tool that takes a config takes a run folder for it.
inline constexpr const char* kRunConfigFileName = "config.yaml";

enum class Activation { kNone, kGelu, kRelu };
enum class Loss { kSoftmaxCrossEntropy };

// A layer of a kind of config/layer_kinds.h (linear, dropout, ...), with the values of
// its kind's keys: the loader (and make_layer) sets every key with a default, so a
// loaded layer holds each key its kind declares, in the kind's order.
struct Layer {
  std::string name;             // unique, [A-Za-z_][A-Za-z0-9_]*
  std::string type = "linear";  // the kind's name
  Attributes attributes;        // its kind's keys

  bool operator==(const Layer&) const = default;
};

struct Init {
  double weights_mean = 0.0;
  double weights_std = 0.02;  // > 0
  bool biases_zero = true;    // `biases: zeros`
  std::uint64_t seed = 42;

  bool operator==(const Init&) const = default;
};

struct Model {
  std::vector<std::int64_t> input_shape{28, 28};  // every dim >= 1
  std::vector<Layer> layers;                      // >= 1; the last one produces the logits
  Loss loss = Loss::kSoftmaxCrossEntropy;
  Init init;
  std::string init_from;  // optional safetensors file with starting weights; empty = none

  bool operator==(const Model&) const = default;
};

// PopXL ReplicaGrouping(group_size, stride) over replication factor R:
// stride == 1 needs R % group_size == 0, replica r is in group r / group_size;
// stride != 1 needs stride * group_size == R, replica r is in group r % stride.
// `group_size: all` (or no group_size) follows the factor: validation sets group_size to
// R, so a `--set replication.factor=N` reshapes such a grouping the way DeepSpeed's and
// FSDP's world size does.
struct Grouping {
  std::string name;
  std::int64_t group_size = 1;
  std::int64_t stride = 1;
  bool all_replicas = false;  // group_size: all, or left out

  bool operator==(const Grouping&) const = default;
};

struct Replication {
  std::int64_t factor = 1;          // >= 1
  std::vector<Grouping> groupings;  // named; names unique

  bool operator==(const Replication&) const = default;
};

enum class RetrievalMode { kOnePerGroup, kAllReplicas };

struct Variables {
  std::string grouping;  // name in replication.groupings; empty = one group of all replicas
  RetrievalMode retrieval_mode = RetrievalMode::kOnePerGroup;

  bool operator==(const Variables&) const = default;
};

// Replicated tensor sharding. `enabled` is false when the section is absent, or when
// replication.factor == 1 (validation warns and turns it off, as PopART does).
struct Sharding {
  bool enabled = false;
  std::int64_t threshold = 1024;  // >= 1: a tensor with nelms >= threshold is sharded
  std::string grouping;           // empty = the variables' grouping
  bool weights = true;
  bool optimizer_state = true;

  bool operator==(const Sharding&) const = default;
};

struct Remote {
  bool weights = false;
  bool optimizer_state = false;

  bool operator==(const Remote&) const = default;
};

enum class ExecutionMode { kPhased, kStandard };
enum class IoMode { kCompute, kIo, kIoOverlapped };
// When a phase's remote weights are loaded (PopART's ExecutionPhaseIOSchedule): at the
// start of the phase that uses them, or during the phase before (Preload).
enum class IoSchedule { kOnDemand, kPreload };
enum class Pass { kForward, kBackward };
// execution.sync_pattern (Poplar's SyncPattern): which devices wait for which at a sync.
// Every device is in GS1; GS2 is all devices (full), each device alone (single_pipeline),
// or one of two ladder sets, the even and the odd devices (replica_and_ladder), which
// do not wait for each other at host and remote IO, so one can stream while the other
// computes.
enum class SyncPattern { kFull, kSinglePipeline, kReplicaAndLadder };

// One item of an explicit phase: `fc1.forward` or `fc1.backward` (the backward item
// also runs that layer's gradient reduction and optimizer step).
struct PhaseItem {
  std::string layer;
  Pass pass = Pass::kForward;

  bool operator==(const PhaseItem&) const = default;
};

struct Execution {
  ExecutionMode mode = ExecutionMode::kStandard;
  bool phases_auto = true;
  // When !phases_auto: each phase lists its items in order. Validation guarantees
  // every layer's forward and backward appear exactly once, forwards in layer order,
  // backwards in reverse layer order, every forward before any backward, and the last
  // layer's backward in the same phase as, and right after, its forward.
  std::vector<std::vector<PhaseItem>> phases;
  IoMode io_mode = IoMode::kCompute;
  std::int64_t io_tiles = 0;                       // > 0 when io_mode is io or io_overlapped
  IoSchedule io_schedule = IoSchedule::kOnDemand;  // preload: phased mode only
  // Written: that pattern. Absent: the default of the performance guide's example,
  // replica_and_ladder when phased and full otherwise; validation writes it.
  std::optional<SyncPattern> sync_pattern;

  bool operator==(const Execution&) const = default;
};

// pipeline: the layers split into stages, each stage on a device of its own, so a run
// uses replication.factor x stages devices (issue 16, docs/pipelining.md). Absent, or
// stages: 1, no pipelining. Validation guarantees: 1 <= stages <= the number of layers;
// an explicit placement has `stages` non-empty stages holding every layer once, in
// model order; with stages > 1, standard mode, no io_overlapped, and
// gradient_accumulation >= 2 x stages.
struct Pipeline {
  std::int64_t stages = 1;
  // auto: contiguous stages of balanced forward + backward FLOPs (planner/pipeline.h,
  // balance_stages); else each stage's layer names. Validation fills `stages` from it.
  bool placement_auto = true;
  std::vector<std::vector<std::string>> placement;
  [[nodiscard]] bool enabled() const { return stages > 1; }

  bool operator==(const Pipeline&) const = default;
};

enum class DType { kFloat32, kFloat16 };

// An optimizer kind's keys at their defaults (config/optimizer_kinds.h).
Attributes default_optimizer_attributes(std::string_view type);

// An optimizer of a kind of config/optimizer_kinds.h (adam as popxl-addons applies it,
// sgd with torch.optim.SGD's semantics), with the keys every kind takes and the values
// of its kind's keys (each key at its default unless the config sets it). Keys of
// another kind are refused.
struct Optimizer {
  std::string type = "adam";
  double lr = 1.0e-3;         // > 0
  double weight_decay = 0.0;  // >= 0
  Attributes attributes = default_optimizer_attributes("adam");

  bool operator==(const Optimizer&) const = default;
};

struct Training {
  std::int64_t micro_batch_size = 1;       // >= 1
  std::int64_t gradient_accumulation = 1;  // >= 1
  std::optional<std::int64_t> epochs;      // >= 1; when neither is given, epochs = 1
  std::optional<std::int64_t> steps;       // >= 1; optimizer steps of the whole run
  Optimizer optimizer;
  std::uint64_t seed = 42;

  bool operator==(const Training&) const = default;
};

enum class Dataset { kMnist, kFashionMnist, kSynthetic, kIdx, kText };

struct Data {
  Dataset dataset = Dataset::kMnist;
  bool shuffle = true;
  double normalize_mean = 0.1307;
  double normalize_std = 0.3081;  // > 0
  std::string
      dir;  // where mnist / fashion-mnist live; empty = $POPKIT_DATA_DIR or ~/.cache/popkit/data
  // dataset: idx — all four required.
  std::string train_images, train_labels, test_images, test_labels;
  // dataset: synthetic
  std::int64_t synthetic_train = 8000;
  std::int64_t synthetic_test = 2000;
  double synthetic_noise = 0.5;
  // dataset: text (engine/data/text_dataset.h): a file's bytes are its tokens (vocabulary
  // 256); a sample is sequence_length tokens and its targets the same window shifted by
  // one byte; the last validation_fraction of the file validates. A relative path is
  // under `dir` (the data folder). Validation makes model.input_shape [sequence_length].
  std::string path;
  std::int64_t sequence_length = 0;  // >= 1, required with dataset text
  double validation_fraction = 0.1;  // in (0, 1)

  bool operator==(const Data&) const = default;
};

struct Eval {
  std::int64_t micro_batch_size = 0;  // 0 = training.micro_batch_size
  std::int64_t every = 0;             // evaluate every N epochs; 0 = only at the end

  bool operator==(const Eval&) const = default;
};

// device.profile names a built-in profile (a file of share/profiles) or gives a
// profile file's path, relative to the config file. Loading a config reads that file
// into `resolved` (config/yaml/profile.h); a Config built in code sets it itself, and
// the planner refuses a Config without one.
struct Device {
  std::string profile = "ipu-mk2";       // a name or a path (holds '/' or ends in .yaml)
  std::uint64_t memory_per_replica = 0;  // bytes; 0 = the profile's own
  std::optional<DeviceProfile> resolved;

  // The same device: `resolved` is read from `profile` (relative to the config's folder),
  // so a comparison of two loaded configs checks the profile files apart.
  bool operator==(const Device& o) const {
    return profile == o.profile && memory_per_replica == o.memory_per_replica;
  }
};

struct Config {
  int version = kSchemaVersion;
  std::string name;
  Model model;
  Replication replication;
  Variables variables;
  Sharding sharding;
  Remote remote;
  Execution execution;
  Pipeline pipeline;
  Training training;
  Data data;
  Eval eval;
  Device device;

  bool operator==(const Config&) const = default;

  // Looks up a grouping by name; an empty name means one group of all replicas.
  // Returns nullopt for an unknown name (validation rejects those).
  [[nodiscard]] std::optional<Grouping> grouping(const std::string& grouping_name) const {
    if (grouping_name.empty()) return Grouping{"", replication.factor, 1};
    for (const auto& g : replication.groupings)
      if (g.name == grouping_name) return g;
    return std::nullopt;
  }
};

}  // namespace popkit::config
