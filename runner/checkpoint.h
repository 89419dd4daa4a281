// Checkpoints of a training run: safetensors files (engine/io/safetensors.h) holding the
// full (gathered) weights, biases and Adam moments by name, and in their metadata where
// training stands (step, epoch, data position, the shuffle seed), the config's hash and
// a checksum. Because tensors are full, a checkpoint restores under any replication
// factor or sharding threshold.
//
// Names: "fc1.weight", "fc1.weight.adam_m", ... hold the value of group 0 (replica 0).
// With several groups (one_per_group), "NAME@group<g>" holds group g's value, g >= 1;
// with retrieval_mode all_replicas, "NAME@replica<r>" holds replica r's copy, r >= 1.
// Adam moments keep the plan's dtype (F16 for first_order_dtype float16, else F32).
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "engine/io/safetensors.h"
#include "runner/checkpoint_metadata.h"

namespace popkit::runner {

// The safetensors content of a checkpoint of `engine` (metadata and checksum included).
engine::SafeTensorsFile make_checkpoint(const engine::Engine& engine, const CheckpointState& state);

// make_checkpoint, written atomically to `path` by rank 0; every rank must call it.
void save_checkpoint(const std::string& path, const engine::Engine& engine,
                     const CheckpointState& state);

// CRC-32 of the tensors (engine::tensors_checksum) continued over every metadata
// "key=value\n" but the checksum's own, in key order: tampering with either shows.
std::uint32_t checkpoint_checksum(const engine::SafeTensorsFile& file);

enum class Restore {
  kEverything,  // weights, biases and Adam moments; all must be present (resume)
  kWeights,     // weights and biases only; other model variables are ignored (init_from, eval)
};

// Reads `path` and checks it: a popkit checkpoint must carry a matching checksum and
// metadata in range (checkpoint_metadata.h; files made elsewhere, without popkit
// metadata, are accepted for kWeights); every tensor must be a variable of the model (or
// a copy of one the metadata announces) with the model's shape; every value restored
// must be finite (and a second moment >= 0); and for kEverything the step and data
// position must be present. Throws InputRefused (runner/input_refused.h, exit 2) naming
// the file and what is wrong.
struct LoadedCheckpoint {
  engine::SafeTensorsFile file;
  bool has_state = false;  // popkit metadata present
  CheckpointState state;
  CheckpointCopies copies;  // as the metadata says (has_state only)
};
LoadedCheckpoint read_checkpoint(const std::string& path, const planner::Plan& plan, Restore what);

// read_checkpoint's checks on a file already in memory; `name` stands for it in messages.
LoadedCheckpoint check_checkpoint(engine::SafeTensorsFile file, const std::string& name,
                                  const planner::Plan& plan, Restore what);

// Writes the checkpoint's values into the engine (every group; per group or replica when
// the checkpoint holds copies that match the plan's groups), and for kEverything the
// Adam step counter. Throws popkit::Error naming `path` when the copies do not fit.
void restore_checkpoint(engine::Engine& engine, const LoadedCheckpoint& checkpoint,
                        const std::string& path, Restore what);

}  // namespace popkit::runner
