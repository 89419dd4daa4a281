#include "engine/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "config/error.h"

namespace popkit::engine {
namespace {

// Header sizes past this are not a checkpoint of ours, nor of anyone's sane file.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

void write_all(int fd, const void* data, std::size_t size, const std::string& path) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("{}: write failed: {}", path, std::strerror(errno));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

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
  // tensors (6 per layer). The names are a map's keys, unique: append them, but for one
  // named like the metadata, which replaces it as operator[] did.
  auto& entries = header.get_ref<nlohmann::ordered_json::object_t&>();
  entries.reserve(entries.size() + file.tensors.size());
  std::uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    nlohmann::ordered_json entry = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    if (name == "__metadata__" && header.contains(name))
      header[name] = std::move(entry);
    else
      entries.emplace_back(name, std::move(entry));
    offset += t.data.size();
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the format recommends.
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  const std::string tmp = (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("{}: cannot write: {}", path, std::strerror(errno));
  try {
    std::uint8_t len[8];
    const std::uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(n >> (8 * i));
    write_all(fd, len, 8, path);
    write_all(fd, text.data(), text.size(), path);
    for (const auto& [name, t] : file.tensors) write_all(fd, t.data.data(), t.data.size(), path);
    if (::fsync(fd) != 0) throw Error("{}: cannot flush to disk: {}", path, std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error("{}: cannot replace: {}", path, why);
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafeTensorsFile read_safetensors(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) throw Error("{}: is a directory, not a checkpoint", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("{}: cannot open for reading", path);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) throw Error("{}: truncated: {} bytes, a safetensors file starts with an 8-byte header length", path, bytes.size());
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{bytes[static_cast<std::size_t>(i)]} << (8 * i);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8)
    throw Error("{}: truncated or not safetensors: header length {} but the file has {} bytes", path, n, bytes.size());
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw Error("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) throw Error("{}: header is not a JSON object", path);
  const std::uint64_t data_size = bytes.size() - 8 - n;
  const std::uint8_t* data = bytes.data() + 8 + n;

  SafeTensorsFile out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw Error("{}: __metadata__ is not an object", path);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) throw Error("{}: __metadata__.{} is not a string", path, m.key());
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    try {
      SafeTensor t;
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = v.at("data_offsets").get<std::vector<std::uint64_t>>();
      const std::int64_t elem = safetensors_dtype_size(t.dtype);
      if (elem == 0) throw Error("{}: tensor {}: unknown dtype {}", path, name, t.dtype);
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size)
        throw Error("{}: tensor {}: data_offsets run past the end of the data ({} bytes): truncated file?", path, name,
                    data_size);
      std::uint64_t nelms = 1;
      for (std::int64_t d : t.shape) {
        if (d < 0) throw Error("{}: tensor {}: negative dimension {}", path, name, d);
        nelms *= static_cast<std::uint64_t>(d);
      }
      if (nelms * static_cast<std::uint64_t>(elem) != offsets[1] - offsets[0])
        throw Error("{}: tensor {}: {} x {} elements need {} bytes but data_offsets give {}", path, name, t.dtype,
                    nelms, nelms * static_cast<std::uint64_t>(elem), offsets[1] - offsets[0]);
      t.data.assign(data + offsets[0], data + offsets[1]);
      ranges.emplace_back(offsets[0], offsets[1]);
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
  if (at != data_size) throw Error("{}: {} bytes of data past the last tensor", path, data_size - at);
  return out;
}

}  // namespace popkit::engine
