#include "engine/runtime/group_sums.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace popkit::engine {
float* floats(const ReplicaBuffer& b) {
  if (b.dtype != DType::kFloat32) throw Error("reductions need float32 tensors");
  return reinterpret_cast<float*>(b.data);
}

void run_sums(
    const std::vector<Sum>& sums, ReduceOp op, const HostedReplicas& hosted, const float* area,
    const std::function<void(std::int64_t, const std::function<void(std::int64_t)>&)>& parallel) {
  struct Piece {
    std::size_t first = 0, end = 0;  // sums [first, end): all of each when more than one
    std::int64_t i0 = 0, count = 0;  // elements from i0 of sums[first], `count` in all
  };
  const auto joins = [](const Sum& a, const Sum& b) {
    return b.n > 0 && b.n < kRunElements && a.members == b.members && a.terms == b.terms &&
           a.stride == b.stride && a.copy_out == b.copy_out && b.offset == a.offset + a.n &&
           b.slot == a.slot + static_cast<std::size_t>(a.n);
  };
  std::vector<Piece> pieces;
  for (std::size_t k = 0; k < sums.size();) {
    const Sum& s = sums[k];
    if (s.n >= kRunElements) {
      for (std::int64_t i = 0; i < s.n; i += kSumPiece)
        pieces.push_back({k, k + 1, i, std::min(s.n, i + kSumPiece) - i});
      ++k;
      continue;
    }
    std::size_t end = k + 1;
    std::int64_t count = s.n;
    for (; end < sums.size() && joins(sums[end - 1], sums[end]) &&
           count + sums[end].n <= kRunElements;
         ++end)
      count += sums[end].n;
    if (count > 0) pieces.push_back({k, end, 0, count});
    k = end;
  }
  for (const Sum& s : sums)
    if (s.padding > 0)
      std::memset(s.out + s.n, 0, static_cast<std::size_t>(s.padding) * sizeof(float));
  // The sum's elements [i0, i0 + count), in `out`, copied to the other members here.
  const auto copy_out = [&](const Sum& s, std::int64_t i0, std::int64_t count) {
    if (!s.copy_out) return;
    for (const auto m : *s.members)
      if (m != s.owner && hosted.hosts(m))
        std::memcpy(floats(*(*s.terms)[static_cast<std::size_t>(m)]) + s.offset + i0, s.out + i0,
                    static_cast<std::size_t>(count) * sizeof(float));
  };
  parallel(static_cast<std::int64_t>(pieces.size()), [&](std::int64_t p) {
    const Piece& piece = pieces[static_cast<std::size_t>(p)];
    const Sum& s = sums[piece.first];
    // The terms' addresses, made per piece so that a call holds O(R) of them per thread.
    thread_local std::vector<const float*> at;
    at.clear();
    std::size_t slot = s.slot;
    for (const auto m : *s.members) {
      if (hosted.hosts(m)) {
        at.push_back(floats(*(*s.terms)[static_cast<std::size_t>(m)]) + s.offset);
      } else {
        at.push_back(area + slot);
        slot += s.stride;
      }
    }
    if (piece.end == piece.first + 1) {
      // One pass into `out` (no scratch: each element is read from every term, `out`'s
      // own among them, before it is written).
      reduce_terms(s.out + piece.i0, at, piece.i0, piece.count, op);
      copy_out(s, piece.i0, piece.count);
      return;
    }
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<std::size_t>(piece.count));
    reduce_terms(scratch.data(), at, 0, piece.count, op);
    const float* from = scratch.data();
    for (std::size_t k = piece.first; k < piece.end; ++k) {
      const Sum& x = sums[k];
      std::memcpy(x.out, from, static_cast<std::size_t>(x.n) * sizeof(float));
      copy_out(x, 0, x.n);
      from += x.n;
    }
  });
}

}  // namespace popkit::engine
