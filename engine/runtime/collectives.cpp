// The in-process backend: all replicas live in this process. It runs the direct
// algorithms of collectives.h as a multi-process backend runs them with point-to-point
// messages, and counts every copy from one replica's buffer into another's as bytes the
// one sent and the other received. Work runs over pieces of 64 KiB of each chunk, in
// parallel on the engine's pool; every element is summed in replica order, so the result
// is the same for any cut and any thread count. Sums are written straight into the
// planned destination (no scratch outside the memory account).
#include "engine/runtime/collectives.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <vector>

#include "base/error.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/thread_pool.h"

namespace popkit::engine {
namespace {

class InProcessCollectives final : public Collectives {
 public:
  InProcessCollectives(std::int64_t r, ThreadPool* pool)
      : factor_(r),
        sent_(static_cast<std::size_t>(r)),
        received_(static_cast<std::size_t>(r)),
        pool_(pool) {}

  void all_reduce(const ReplicaGrouping& g, ReduceOp op,
                  std::span<const ReplicaBuffer> tensors) override {
    const auto by_replica = index(tensors, "all_reduce");
    struct Task {  // one owner chunk of one group
      std::vector<std::int64_t> members;
      std::vector<const float*> src;  // the members' chunks, in replica order
      std::vector<float*> dst;        // the same chunks, written with the result
      std::size_t owner;              // rank of the member that owns the chunk
      std::int64_t n;
    };
    std::vector<Task> chunks;
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      const auto members = g.members(group);
      const std::int64_t n = by_replica[static_cast<std::size_t>(members[0])]->nelms;
      check_same(by_replica, members, n, "all_reduce");
      for (const auto m : members) check_float(*by_replica[static_cast<std::size_t>(m)]);
      if (members.size() < 2) continue;  // the sum or mean of one tensor is itself
      const auto size = static_cast<std::int64_t>(members.size());
      for (std::int64_t k = 0; k < size; ++k) {
        const OwnerChunk c = owner_chunk(n, size, k);
        if (c.n == 0) continue;
        Task t{members, {}, {}, static_cast<std::size_t>(k), c.n};
        for (const auto m : members) {
          auto* x =
              reinterpret_cast<float*>(by_replica[static_cast<std::size_t>(m)]->data) + c.first;
          t.src.push_back(x);
          t.dst.push_back(x);
        }
        chunks.push_back(std::move(t));
      }
    }
    for_chunks(chunks, [&](const Task& t, std::int64_t i0, std::int64_t i1) {
      const auto nbytes = static_cast<std::size_t>(i1 - i0) * sizeof(float);
      const std::int64_t owner = t.members[t.owner];
      float* own = t.dst[t.owner] + i0;
      // The owner receives the piece from every other member and sums in replica order,
      // ((x_m0 + x_m1) + x_m2) ... [/ G], in one pass into its own chunk (no scratch: each
      // element is read from every term before it is written).
      reduce_terms(own, t.src, i0, i1 - i0, op);
      for (const auto m : t.members) moved(m, owner, nbytes);
      // Then sends the result to every other member.
      for (std::size_t k = 0; k < t.dst.size(); ++k) {
        if (k == t.owner) continue;
        std::memcpy(t.dst[k] + i0, own, nbytes);
        moved(owner, t.members[k], nbytes);
      }
    });
  }

  void reduce_scatter(const ReplicaGrouping& g, const ReplicaGrouping& shard, ReduceOp op,
                      std::span<const ReplicaBuffer> src,
                      std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "reduce_scatter");
    const auto dst_of = index(dst, "reduce_scatter");
    struct Task {
      std::vector<std::int64_t> members;
      std::vector<const float*> src;  // the shard's slice of the group's tensors, in replica order
      std::int64_t to;                // the member holding the shard
      float* dst;                     // its shard
      std::int64_t n_dst;
      std::int64_t n;  // elements of the shard to reduce (the rest is padding)
    };
    std::vector<Task> shards;
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      const auto members = g.members(group);
      const std::int64_t n = src_of[static_cast<std::size_t>(members[0])]->nelms;
      check_same(src_of, members, n, "reduce_scatter");
      std::vector<const float*> srcs;
      for (const auto m : members) {
        check_float(*src_of[static_cast<std::size_t>(m)]);
        srcs.push_back(reinterpret_cast<const float*>(src_of[static_cast<std::size_t>(m)]->data));
      }
      for (const auto m : members) {
        const ReplicaBuffer& d = *dst_of[static_cast<std::size_t>(m)];
        if (d.dtype != DType::kFloat32)
          throw Error("reduce_scatter: the destination must be float32");
        const std::int64_t offset = shard.rank_in_group(m) * d.nelms;
        const std::int64_t avail = shard_extent(n, d.nelms, shard.rank_in_group(m));
        std::vector<const float*> from;  // none when the shard is all padding
        if (avail > 0)
          for (const float* x : srcs) from.push_back(x + offset);
        shards.push_back(
            {members, std::move(from), m, reinterpret_cast<float*>(d.data), d.nelms, avail});
      }
    }
    for (const Task& t : shards)  // zero past the end: padding, nothing received
      if (t.n < t.n_dst)
        std::memset(t.dst + t.n, 0, static_cast<std::size_t>(t.n_dst - t.n) * sizeof(float));
    // The member holding a shard receives its slice from every other member of the group.
    for_chunks(shards, [&](const Task& t, std::int64_t i0, std::int64_t i1) {
      reduce_terms(t.dst + i0, t.src, i0, i1 - i0, op);
      for (const auto m : t.members)
        moved(m, t.to, static_cast<std::size_t>(i1 - i0) * sizeof(float));
    });
  }

  void all_gather(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                  std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "all_gather");
    const auto dst_of = index(dst, "all_gather");
    struct Task {  // one shard into one member's full tensor
      std::int64_t from, to;
      const std::byte* src;
      std::byte* dst;
      std::int64_t n;  // bytes, truncated to the destination
    };
    std::vector<Task> copies;
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      const auto members = g.members(group);
      const ReplicaBuffer& s0 = *src_of[static_cast<std::size_t>(members[0])];
      const std::size_t e = elem_size(s0.dtype);
      check_same(src_of, members, s0.nelms, "all_gather");
      const std::size_t shard_bytes = static_cast<std::size_t>(s0.nelms) * e;
      const std::size_t total = shard_bytes * members.size();
      for (const auto m : members) {
        const ReplicaBuffer& d = *dst_of[static_cast<std::size_t>(m)];
        if (d.dtype != s0.dtype) throw Error("all_gather: source and destination dtypes differ");
        const std::size_t want = static_cast<std::size_t>(d.nelms) * e;
        if (want > total)
          throw Error("all_gather: destination of {} elements but the group's {} shards hold {}",
                      d.nelms, members.size(), total / e);
        for (std::size_t k = 0; k < members.size(); ++k) {
          const std::size_t at = k * shard_bytes;
          if (at >= want) break;  // the padded tail is not moved
          copies.push_back({members[k], m, src_of[static_cast<std::size_t>(members[k])]->data,
                            d.data + at,
                            static_cast<std::int64_t>(std::min(shard_bytes, want - at))});
        }
      }
    }
    parallel(static_cast<std::int64_t>(copies.size()), [&](std::int64_t i) {
      const Task& t = copies[static_cast<std::size_t>(i)];
      std::memcpy(t.dst, t.src, static_cast<std::size_t>(t.n));
      moved(t.from, t.to, static_cast<std::size_t>(t.n));
    });
  }

  void slice_shard(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                   std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "slice_shard");
    const auto dst_of = index(dst, "slice_shard");
    for (std::int64_t r = 0; r < factor_; ++r) {
      const ReplicaBuffer* s = src_of[static_cast<std::size_t>(r)];
      const ReplicaBuffer* d = dst_of[static_cast<std::size_t>(r)];
      if (s == nullptr || d == nullptr) continue;
      copy_shard(*s, *d, g.rank_in_group(r));
    }
  }

  [[nodiscard]] CollectiveBytes bytes(std::int64_t replica) const override {
    const auto r = static_cast<std::size_t>(replica);
    return {sent_[r].load(std::memory_order_relaxed), received_[r].load(std::memory_order_relaxed)};
  }

 private:
  static constexpr std::int64_t kPiece = 16384;  // 64 KiB of float: a piece per task

  static std::size_t elem_size(DType t) { return static_cast<std::size_t>(planner::dtype_size(t)); }

  // Bytes copied from replica `from`'s buffer into replica `to`'s (pieces run on several
  // threads at once, hence atomics; the totals do not depend on the order).
  void moved(std::int64_t from, std::int64_t to, std::size_t nbytes) {
    if (from == to) return;
    sent_[static_cast<std::size_t>(from)].fetch_add(nbytes, std::memory_order_relaxed);
    received_[static_cast<std::size_t>(to)].fetch_add(nbytes, std::memory_order_relaxed);
  }

  // Buffers by replica; every replica must be present exactly once (in-process).
  std::vector<const ReplicaBuffer*> index(std::span<const ReplicaBuffer> bufs,
                                          const char* what) const {
    std::vector<const ReplicaBuffer*> out(static_cast<std::size_t>(factor_), nullptr);
    for (const auto& b : bufs) {
      if (b.replica < 0 || b.replica >= factor_ || out[static_cast<std::size_t>(b.replica)])
        throw Error("{}: replica {} given twice or out of range (R = {})", what, b.replica,
                    factor_);
      out[static_cast<std::size_t>(b.replica)] = &b;
    }
    for (std::int64_t r = 0; r < factor_; ++r)
      if (!out[static_cast<std::size_t>(r)])
        throw Error("{}: no buffer for replica {} (the in-process backend hosts all {})", what, r,
                    factor_);
    return out;
  }

  static void check_same(const std::vector<const ReplicaBuffer*>& by_replica,
                         const std::vector<std::int64_t>& members, std::int64_t n,
                         const char* what) {
    for (const auto m : members)
      if (by_replica[static_cast<std::size_t>(m)]->nelms != n)
        throw Error("{}: replica {} gives {} elements but replica {} gives {}", what, m,
                    by_replica[static_cast<std::size_t>(m)]->nelms, members[0], n);
  }

  static void check_float(const ReplicaBuffer& b) {
    if (b.dtype != DType::kFloat32) throw Error("reductions need float32 tensors");
  }

  // fn(task, i0, i1) over pieces of every task's `n` elements, on the pool when there is one.
  template <typename Task, typename Fn>
  void for_chunks(const std::vector<Task>& tasks, const Fn& fn) {
    std::vector<std::pair<std::size_t, std::int64_t>> pieces;  // (task, first element)
    for (std::size_t t = 0; t < tasks.size(); ++t)
      for (std::int64_t i = 0; i < tasks[t].n; i += kPiece) pieces.emplace_back(t, i);
    parallel(static_cast<std::int64_t>(pieces.size()), [&](std::int64_t c) {
      const auto [t, i0] = pieces[static_cast<std::size_t>(c)];
      fn(tasks[t], i0, std::min(tasks[t].n, i0 + kPiece));
    });
  }

  void parallel(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
    if (pool_ != nullptr && pool_->size() > 1 && n > 1) {
      pool_->run(n, fn);
    } else {
      for (std::int64_t i = 0; i < n; ++i) fn(i);
    }
  }

  std::int64_t factor_;
  std::vector<std::atomic<std::uint64_t>> sent_, received_;
  ThreadPool* pool_;
};

}  // namespace

void reduce_terms(float* out, const std::vector<const float*>& terms, std::int64_t i0,
                  std::int64_t count, ReduceOp op) {
  const float d =
      op == ReduceOp::kMean && terms.size() > 1 ? static_cast<float>(terms.size()) : 1.0f;
  kernels().reduce(out, terms.data(), static_cast<std::int64_t>(terms.size()), i0, count, d);
}

void copy_shard(const ReplicaBuffer& src, const ReplicaBuffer& dst, std::int64_t rank) {
  if (src.dtype != dst.dtype) throw Error("slice_shard: source and destination dtypes differ");
  const auto e = static_cast<std::size_t>(planner::dtype_size(src.dtype));
  const std::int64_t avail = shard_extent(src.nelms, dst.nelms, rank);
  if (avail > 0)
    std::memcpy(dst.data, src.data + static_cast<std::size_t>(rank * dst.nelms) * e,
                static_cast<std::size_t>(avail) * e);
  if (avail < dst.nelms)
    std::memset(dst.data + static_cast<std::size_t>(avail) * e, 0,
                static_cast<std::size_t>(dst.nelms - avail) * e);
}

std::unique_ptr<Collectives> make_in_process_collectives(std::int64_t replication_factor,
                                                         ThreadPool* pool) {
  return std::make_unique<InProcessCollectives>(replication_factor, pool);
}

}  // namespace popkit::engine
