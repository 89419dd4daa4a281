// Host memory for the engine's large blocks: a replica's device memory block
// (planner/device_layout.h) and its streaming memory (remote_store.h). 64-byte aligned,
// so vectorised loops see the same alignment whatever the tensor; a block of 2 MiB or
// more is aligned to 2 MiB and asks for transparent huge pages (MADV_HUGEPAGE: Debian's
// kernels may give them to anonymous memory only when asked). Standard mode streams every
// layer's weights and gradients (14 MiB for the MNIST example's two replicas) for each
// micro-batch, and phased mode copies weights and optimizer state between the two blocks
// every phase; on 4 KiB pages both reach beyond what the TLB covers.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

namespace popkit::engine {

class AlignedBlock {
 public:
  static constexpr std::uint64_t kHugePage = std::uint64_t{2} << 20;
  AlignedBlock() = default;
  // `zero`: filled with zero bytes (streaming memory starts zeroed, as PopXL's does).
  explicit AlignedBlock(std::uint64_t n, bool zero = false)
      : align_(n >= kHugePage ? kHugePage : 64),
        data_(static_cast<std::byte*>(
            ::operator new (std::max<std::uint64_t>(n, 1), std::align_val_t{align_}))) {
    if (align_ == kHugePage) madvise(data_, n / kHugePage * kHugePage, MADV_HUGEPAGE);
    if (zero) std::memset(data_, 0, n);
  }
  AlignedBlock(AlignedBlock&& o) noexcept
      : align_(o.align_), data_(std::exchange(o.data_, nullptr)) {}
  AlignedBlock& operator=(AlignedBlock&& o) noexcept {
    if (this != &o) {
      reset();
      align_ = o.align_;
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  AlignedBlock(const AlignedBlock&) = delete;
  AlignedBlock& operator=(const AlignedBlock&) = delete;
  ~AlignedBlock() { reset(); }
  void reset() {
    if (data_) ::operator delete (data_, std::align_val_t{align_});
    data_ = nullptr;
  }
  [[nodiscard]] std::byte* data() const { return data_; }

 private:
  std::uint64_t align_ = 64;
  std::byte* data_ = nullptr;
};

}  // namespace popkit::engine
