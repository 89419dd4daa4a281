// The metadata of a popkit checkpoint (safetensors "__metadata__", string -> string):
// where training stands, what the run was, and how many copies of each variable the file
// holds. Written from a CheckpointState; read back with every field checked on its own
// and against the others, so a position, batch size or step count that no run could
// have written is refused with the field, its value and the allowed range.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runner/data_order.h"

namespace popkit::runner {

inline constexpr const char* kCheckpointFormat = "popkit-checkpoint";
inline constexpr int kCheckpointVersion = 1;

// Counts in the metadata (steps, samples, replicas) are at most 2^53: exact in the
// doubles JSON readers make of them, and far from int64 overflow in step + 1 or in
// epoch x steps-per-epoch.
inline constexpr std::int64_t kMaxMetadataCount = std::int64_t{1} << 53;

struct CheckpointState {
  std::int64_t step = 0;  // optimizer steps done
  DataPosition data;
  bool shuffle = true;
  std::uint64_t shuffle_seed = 0;
  std::int64_t global_batch_size = 0;
  std::int64_t n_train = 0;
  std::string config_name;
  std::string config_hash;
  // The config as resolved (runner/resolved_config.h), as JSON text: what a resume
  // compares key by key (runner/config_match.h). "" in checkpoints older than it.
  std::string config;
};

// How the variables are stored: "one" value each, or one per "group" or "replica"
// ("NAME@group<g>", g >= 1, beside the plain NAME for copy 0).
struct CheckpointCopies {
  std::string kind = "one";
  std::int64_t n_copies = 1;
  std::int64_t n_groups = 1;
  std::int64_t replication_factor = 1;
};

struct CheckpointMetadata {
  CheckpointState state;
  CheckpointCopies copies;
};

// Every field but the checksum (which covers them all, so it is added last).
void put_checkpoint_metadata(std::map<std::string, std::string>& metadata,
                             const CheckpointMetadata& m);

// 'format_version' is present and one this build reads (1 to kCheckpointVersion).
void check_format_version(const std::map<std::string, std::string>& metadata,
                          const std::string& name);

// check_format_version, then every other field but the checksum, each present and in range: "NAME:
// checkpoint metadata 'data_position' is 1000000000000, out of range 0 to 480 (...)". `name` stands
// for the file in messages. Throws popkit::Error.
CheckpointMetadata parse_checkpoint_metadata(const std::map<std::string, std::string>& metadata,
                                             const std::string& name);

}  // namespace popkit::runner
