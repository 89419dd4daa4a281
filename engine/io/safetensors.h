// Checkpoint files in the safetensors format, so PyTorch, numpy and every safetensors
// reader open them: an 8-byte little-endian header length, a JSON header mapping each
// name to {dtype, shape, data_offsets} plus "__metadata__" (string -> string), then the
// raw little-endian data. Writes are atomic: a temporary file in the same folder,
// flushed to disk, then renamed over the target, so a crash or kill at any moment
// leaves the previous file intact.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace popkit::engine {

struct SafeTensor {
  std::string dtype;                // "F32", "F16", "I64", "U8", ...
  std::vector<std::int64_t> shape;  // row-major
  std::vector<std::uint8_t> data;   // little-endian
};

struct SafeTensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Bytes per element of a safetensors dtype; 0 for an unknown one.
std::int64_t safetensors_dtype_size(const std::string& dtype);

// CRC-32 of every tensor's name, dtype, shape and data, in name order: the checksum
// a checkpoint keeps in its metadata to detect tampering and truncation.
std::uint32_t tensors_checksum(const SafeTensorsFile& file);

// Throws popkit::Error naming the file when it cannot be written.
void write_safetensors(const std::string& path, const SafeTensorsFile& file);

// A safetensors file may have at most this many bytes: far above any model this engine
// plans, and a bound on what one read allocates.
inline constexpr std::uint64_t kMaxSafetensorsBytes = std::uint64_t{16} << 30;

// Reads `path` (a regular file only, see base/input_file.h) and parses it with
// parse_safetensors. Throws popkit::Error naming the file and what is wrong.
SafeTensorsFile read_safetensors(const std::string& path);

// The safetensors reader on bytes in memory; `name` stands for the file in messages.
// Throws popkit::Error naming it and what is wrong: truncated, a header that is not JSON
// or not a safetensors header, a shape or offsets that are not integers >= 0, offsets
// that overlap, leave gaps or run past the end, a dtype and shape that disagree with the
// byte count.
SafeTensorsFile parse_safetensors(std::string_view bytes, const std::string& name);

}  // namespace popkit::engine
