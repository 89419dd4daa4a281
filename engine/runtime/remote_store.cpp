// Remote buffers as zero-filled byte ranges of one block, one per plan buffer.
#include "engine/runtime/remote_store.h"

#include <cstring>

#include "base/error.h"

namespace popkit::engine {

RemoteStore::RemoteStore(const std::vector<planner::RemoteBuffer>& buffers) : buffers_(&buffers) {
  std::uint64_t size = 0;
  offsets_.reserve(buffers.size());
  for (const auto& b : buffers) {
    offsets_.push_back(size);
    size += (b.nbytes() + 63) / 64 * 64;
    account_.bytes += b.nbytes();
    account_.by_class[static_cast<std::size_t>(b.cls)] += b.nbytes();
  }
  block_ = AlignedBlock(size, /*zero=*/true);
}

void RemoteStore::check(int buffer, std::int64_t entry, std::uint64_t nbytes,
                        const char* what) const {
  if (buffer < 0 || static_cast<std::size_t>(buffer) >= buffers_->size())
    throw Error("{}: remote buffer {} does not exist (the plan has {})", what, buffer,
                buffers_->size());
  const auto& b = (*buffers_)[static_cast<std::size_t>(buffer)];
  if (entry < 0 || entry >= b.entries())
    throw Error("{}: entry {} of remote buffer '{}' is out of range ({} rows x {} steps)", what,
                entry, b.name, b.rows, b.steps);
  if (nbytes != b.entry_bytes)
    throw Error("{}: tensor of {} bytes but remote buffer '{}' has entries of {} bytes", what,
                nbytes, b.name, b.entry_bytes);
}

void RemoteStore::load(int buffer, std::int64_t entry, std::byte* dst, std::uint64_t nbytes) const {
  check(buffer, entry, nbytes, "remote_load");
  std::memcpy(dst, this->entry(buffer, entry), nbytes);
}

void RemoteStore::store(int buffer, std::int64_t entry, const std::byte* src,
                        std::uint64_t nbytes) {
  check(buffer, entry, nbytes, "remote_store");
  std::memcpy(this->entry(buffer, entry), src, nbytes);
}

std::byte* RemoteStore::entry(int buffer, std::int64_t entry) {
  const auto& b = (*buffers_)[static_cast<std::size_t>(buffer)];
  return block_.data() + offsets_[static_cast<std::size_t>(buffer)] +
         static_cast<std::uint64_t>(entry) * b.entry_bytes;
}

const std::byte* RemoteStore::entry(int buffer, std::int64_t entry) const {
  const auto& b = (*buffers_)[static_cast<std::size_t>(buffer)];
  return block_.data() + offsets_[static_cast<std::size_t>(buffer)] +
         static_cast<std::uint64_t>(entry) * b.entry_bytes;
}

}  // namespace popkit::engine
