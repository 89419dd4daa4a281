// Streaming memory of one replica: the plan's remote buffers, each `rows x steps`
// entries of `entry_bytes`, addressed as PopXL does (entry = row * steps + step for a
// batch-serial buffer). Sharded buffers hold this replica's own shard. Raw bytes, so a
// float16 optimizer state moves bit for bit. One zeroed block holds every buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/runtime/aligned_block.h"
#include "engine/runtime/memory_account.h"
#include "planner/plan.h"

namespace popkit::engine {

class RemoteStore {
 public:
  explicit RemoteStore(const std::vector<planner::RemoteBuffer>& buffers);

  // Copies between a device tensor (nbytes) and one entry; a wrong buffer, entry or
  // size is a popkit::Error naming the buffer and both sizes.
  void load(int buffer, std::int64_t entry, std::byte* dst, std::uint64_t nbytes) const;
  void store(int buffer, std::int64_t entry, const std::byte* src, std::uint64_t nbytes);

  [[nodiscard]] std::byte* entry(int buffer, std::int64_t entry);
  [[nodiscard]] const std::byte* entry(int buffer, std::int64_t entry) const;
  [[nodiscard]] const StreamingAccount& account() const { return account_; }

 private:
  void check(int buffer, std::int64_t entry, std::uint64_t nbytes, const char* what) const;

  const std::vector<planner::RemoteBuffer>* buffers_;
  AlignedBlock block_;                  // every buffer, each at a 64-byte boundary
  std::vector<std::uint64_t> offsets_;  // of each buffer in block_
  StreamingAccount account_;
};

}  // namespace popkit::engine
