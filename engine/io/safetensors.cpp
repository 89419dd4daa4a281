#include "engine/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "base/input_file.h"
#include "base/output_file.h"

namespace popkit::engine {
namespace {

// Header sizes past this are not a checkpoint of ours, nor of anyone's sane file.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

}  // namespace

std::int64_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

std::uint32_t tensors_checksum(const SafeTensorsFile& file) {
  uLong crc = crc32(0L, Z_NULL, 0);
  auto add = [&crc](const void* p, std::size_t n) {
    crc = crc32(crc, static_cast<const Bytef*>(p), static_cast<uInt>(n));
  };
  for (const auto& [name, t] : file.tensors) {
    add(name.data(), name.size());
    add(t.dtype.data(), t.dtype.size());
    for (std::int64_t d : t.shape) add(&d, sizeof d);
    add(t.data.data(), t.data.size());
  }
  return static_cast<std::uint32_t>(crc);
}

void write_safetensors(const std::string& path, const SafeTensorsFile& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  // ordered_json's operator[] finds a key by a linear scan, O(n^2) over a checkpoint's
  // tensors (6 per layer). The names are a map's keys, unique: append them.
  auto& entries = header.get_ref<nlohmann::ordered_json::object_t&>();
  entries.reserve(entries.size() + file.tensors.size());
  std::uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    // Tensor names are "<layer>.<role>": never the header's "__metadata__" key.
    POPKIT_ASSERT(name != "__metadata__");
    entries.emplace_back(
        name, nlohmann::ordered_json{{"dtype", t.dtype},
                                     {"shape", t.shape},
                                     {"data_offsets", {offset, offset + t.data.size()}}});
    offset += t.data.size();
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the format recommends.
  text.append((8 - text.size() % 8) % 8, ' ');

  AtomicFile out(path, TemporaryName::kHiddenPerProcess);
  std::uint8_t len[8];
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(n >> (8 * i));
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (const auto& [name, t] : file.tensors) out.write(t.data.data(), t.data.size());
  out.commit();
}

SafeTensorsFile read_safetensors(const std::string& path) {
  InputFile file = open_input_file(path, "expected a safetensors checkpoint");
  return parse_safetensors(file.read_all(kMaxSafetensorsBytes, "safetensors file"), path);
}

namespace {

// A JSON list of integers >= 0 (a shape or data_offsets); empty when it is not one.
std::optional<std::vector<std::uint64_t>> naturals(const nlohmann::json& v) {
  if (!v.is_array()) return std::nullopt;
  std::vector<std::uint64_t> out;
  for (const nlohmann::json& x : v) {
    if (!x.is_number_unsigned()) return std::nullopt;  // negative ones are number_integer
    out.push_back(x.get<std::uint64_t>());
  }
  return out;
}

}  // namespace

SafeTensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 8)
    throw Error("{}: truncated: {} bytes, a safetensors file starts with an 8-byte header length",
                path, bytes.size());
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= std::uint64_t{static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)])} << (8 * i);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8)
    throw Error("{}: truncated or not safetensors: header length {} but the file has {} bytes",
                path, n, bytes.size());
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, static_cast<std::size_t>(n)));
  } catch (const nlohmann::json::exception& e) {
    throw Error("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) throw Error("{}: header is not a JSON object", path);
  const std::uint64_t data_size = bytes.size() - 8 - n;
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data()) + 8 + n;

  SafeTensorsFile out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw Error("{}: __metadata__ is not an object", path);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw Error("{}: __metadata__.{} is not a string", path, m.key());
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    try {
      SafeTensor t;
      t.dtype = v.at("dtype").get<std::string>();
      const auto shape = naturals(v.at("shape"));
      if (!shape)
        throw Error("{}: tensor {}: shape is {}, not a list of integers >= 0", path, name,
                    v.at("shape").dump());
      const auto offsets = naturals(v.at("data_offsets"));
      if (!offsets || offsets->size() != 2)
        throw Error("{}: tensor {}: data_offsets is {}, not two integers >= 0", path, name,
                    v.at("data_offsets").dump());
      const std::int64_t elem = safetensors_dtype_size(t.dtype);
      if (elem == 0) throw Error("{}: tensor {}: unknown dtype {}", path, name, t.dtype);
      // bytes = elem x product of the dimensions, checked: a product that wraps (to 0,
      // say) would pass for an empty tensor.
      std::uint64_t nbytes = static_cast<std::uint64_t>(elem);
      for (const std::uint64_t d : *shape) {
        if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          throw Error("{}: tensor {}: dimension {} is more than 2^63 - 1", path, name, d);
        if (__builtin_mul_overflow(nbytes, d, &nbytes))
          throw Error("{}: tensor {}: shape [{}] of {} needs more than 2^64 bytes", path, name,
                      fmt::join(*shape, ", "), t.dtype);
      }
      const std::uint64_t begin = (*offsets)[0], end = (*offsets)[1];
      if (begin > end || end > data_size)
        throw Error(
            "{}: tensor {}: data_offsets run past the end of the data ({} bytes): truncated "
            "file?",
            path, name, data_size);
      if (nbytes != end - begin)
        throw Error("{}: tensor {}: {} x {} elements need {} bytes but data_offsets give {}", path,
                    name, t.dtype, nbytes / static_cast<std::uint64_t>(elem), nbytes, end - begin);
      t.shape.assign(shape->begin(), shape->end());
      t.data.assign(data + begin, data + end);
      ranges.emplace_back(begin, end);
      out.tensors.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      throw Error("{}: tensor {}: not a safetensors entry: {}", path, name, e.what());
    }
  }
  // The data must be covered exactly once: no overlaps, no gaps, nothing trailing.
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t at = 0;
  for (const auto& [b, e] : ranges) {
    if (b != at) throw Error("{}: tensor data overlaps or leaves a gap at byte {}", path, at);
    at = e;
  }
  if (at != data_size)
    throw Error("{}: {} bytes of data past the last tensor", path, data_size - at);
  return out;
}

}  // namespace popkit::engine
