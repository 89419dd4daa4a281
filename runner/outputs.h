// The files a run writes, checked before its first step, and the temporaries that runs
// killed while writing left behind. A run writes its run file through
// ".<run file>.tmp-<pid>" (reports::write_run_file) and its checkpoints
// "checkpoint-step<N>.safetensors" through ".checkpoint-step<N>.safetensors.tmp-<pid>"
// (engine::write_safetensors), each
// renamed into place when whole; so a path that rename cannot replace, or a folder that
// cannot be written, would otherwise fail only after the training it was meant to keep.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace popkit::runner {

// "checkpoint-step12.safetensors" -> 12; nullopt for any other name (as poprun writes
// them: no leading zeros).
std::optional<std::int64_t> checkpoint_step(const std::string& name);

// Creates `dir` (and its parents) and proves it writable with a probe file. Throws
// popkit::Error "DIR: cannot create the WHAT folder: REASON" or "DIR: cannot write to
// the WHAT folder: REASON".
void ensure_writable_dir(const std::filesystem::path& dir, const std::string& what);

// The run file: names a file (not "out/"), is not a directory or other non-regular file
// (rename would fail, or replace a FIFO or device node), its temporary is not in the
// way, and its folder can be created and written. Throws popkit::Error naming the path.
void check_run_file_path(const std::string& path);

// No checkpoint this run may write into `dir` (step >= first_step) is a directory or
// other non-regular file: "DIR/checkpoint-step5.safetensors: is a directory, but ...".
void check_checkpoint_paths(const std::filesystem::path& dir, std::int64_t first_step);

// Removes the temporaries a killed run left, those whose process is gone: beside the
// run file (when run_file is not ""), ".<its name>.tmp-<pid>", and in the checkpoint
// folder (when given), ".checkpoint-step<N>.safetensors.tmp-<pid>". Only regular files
// with exactly these names; returns the paths removed.
std::vector<std::string> remove_stale_temporaries(
    const std::optional<std::filesystem::path>& checkpoint_dir, const std::string& run_file);

}  // namespace popkit::runner
