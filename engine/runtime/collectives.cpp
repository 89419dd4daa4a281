// The in-process backend: all replicas live in this process. Reductions run over
// chunks of the elements, each chunk summed in replica order straight into a
// destination (the first member's buffer for an all-reduce, the shard for a
// reduce-scatter), so there is no scratch and no extra copy; chunks are independent, so
// they run in parallel on the engine's pool and the result is the same for any chunking.
#include "engine/runtime/collectives.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "config/error.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/thread_pool.h"

namespace popkit::engine {
namespace {

class InProcessCollectives final : public Collectives {
 public:
  InProcessCollectives(std::int64_t r, ThreadPool* pool)
      : factor_(r), bytes_(static_cast<std::size_t>(r)), pool_(pool) {}

  void all_reduce(const ReplicaGrouping& g, ReduceOp op,
                  std::span<const ReplicaBuffer> tensors) override {
    const auto by_replica = index(tensors, "all_reduce");
    struct Task {
      std::vector<const float*> src;
      std::vector<float*> dst;
      std::int64_t n;
    };
    std::vector<Task> groups;
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      const auto members = g.members(group);
      const std::int64_t n = by_replica[static_cast<std::size_t>(members[0])]->nelms;
      check_same(by_replica, members, n, "all_reduce");
      Task t{{}, {}, n};
      for (const auto m : members) {
        const ReplicaBuffer& b = *by_replica[static_cast<std::size_t>(m)];
        check_float(b);
        t.src.push_back(reinterpret_cast<const float*>(b.data));
        t.dst.push_back(reinterpret_cast<float*>(b.data));
        count(m, ring_bytes(2, b.nelms * 4, g.group_size));
      }
      groups.push_back(std::move(t));
    }
    // x_m0 = ((x_m0 + x_m1) + x_m2) ... [/ G], chunk by chunk, then copied to the others.
    for_chunks(groups, [&](const Task& t, std::int64_t i0, std::int64_t i1) {
      sum_into(t.dst[0] + i0, t.src, i0, i1, op);
      for (std::size_t k = 1; k < t.dst.size(); ++k)
        std::memcpy(t.dst[k] + i0, t.dst[0] + i0,
                    static_cast<std::size_t>(i1 - i0) * sizeof(float));
    });
  }

  void reduce_scatter(const ReplicaGrouping& g, const ReplicaGrouping& shard, ReduceOp op,
                      std::span<const ReplicaBuffer> src,
                      std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "reduce_scatter");
    const auto dst_of = index(dst, "reduce_scatter");
    struct Task {
      std::vector<const float*> src;  // the shard's slice of the group's tensors, in replica order
      float* dst;                     // one member's shard
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
        const std::int64_t avail = std::max<std::int64_t>(0, std::min(d.nelms, n - offset));
        std::vector<const float*> from;  // none when the shard is all padding
        if (avail > 0)
          for (const float* x : srcs) from.push_back(x + offset);
        shards.push_back({std::move(from), reinterpret_cast<float*>(d.data), d.nelms, avail});
        count(m, ring_bytes(1, n * 4, g.group_size));
      }
    }
    for (const Task& t : shards)  // zero past the end
      if (t.n < t.n_dst)
        std::memset(t.dst + t.n, 0, static_cast<std::size_t>(t.n_dst - t.n) * sizeof(float));
    for_chunks(shards, [&](const Task& t, std::int64_t i0, std::int64_t i1) {
      sum_into(t.dst + i0, t.src, i0, i1, op);
    });
  }

  void all_gather(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                  std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "all_gather");
    const auto dst_of = index(dst, "all_gather");
    struct Task {  // one shard into one member's full tensor
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
          if (at >= want) break;
          copies.push_back({src_of[static_cast<std::size_t>(members[k])]->data, d.data + at,
                            static_cast<std::int64_t>(std::min(shard_bytes, want - at))});
        }
        count(m, shard_bytes * static_cast<std::uint64_t>(g.group_size - 1));
      }
    }
    parallel(static_cast<std::int64_t>(copies.size()), [&](std::int64_t i) {
      const Task& t = copies[static_cast<std::size_t>(i)];
      std::memcpy(t.dst, t.src, static_cast<std::size_t>(t.n));
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
      if (s->dtype != d->dtype) throw Error("slice_shard: source and destination dtypes differ");
      copy_slice(s->data, s->nelms, g.rank_in_group(r) * d->nelms, d->data, d->nelms,
                 elem_size(s->dtype));
    }
  }

  [[nodiscard]] CollectiveBytes bytes(std::int64_t replica) const override {
    return bytes_[static_cast<std::size_t>(replica)];
  }

 private:
  static std::size_t elem_size(DType t) { return static_cast<std::size_t>(planner::dtype_size(t)); }

  // Each way: k (G-1) nbytes / G  (a ring: k = 1 reduce-scatter, k = 2 all-reduce), as
  // the planner's cost model counts it.
  static std::uint64_t ring_bytes(std::int64_t k, std::int64_t nbytes, std::int64_t g) {
    return static_cast<std::uint64_t>(k * (g - 1) * nbytes / g);
  }

  void count(std::int64_t replica, std::uint64_t each_way) {
    auto& b = bytes_[static_cast<std::size_t>(replica)];
    b.sent += each_way;
    b.received += each_way;
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

  // out[0, i1 - i0) = ((x_0 + x_1) + x_2) ... over elements [i0, i1) of every x, in
  // replica order; divided by the number of terms for a mean. `out` may be x_0 + i0.
  static void sum_into(float* out, const std::vector<const float*>& x, std::int64_t i0,
                       std::int64_t i1, ReduceOp op) {
    const std::int64_t n = i1 - i0;
    const Kernels& kern = kernels();
    std::size_t k = 1;
    if (out == x[0] + i0) {
      // in place in x_0
    } else if (x.size() > 1) {
      kern.sum(out, x[0] + i0, x[1] + i0, n);  // one pass, not a copy and then a sum
      k = 2;
    } else {
      std::memcpy(out, x[0] + i0, static_cast<std::size_t>(n) * sizeof(float));
    }
    for (; k < x.size(); ++k) kern.add(out, x[k] + i0, n);
    if (op == ReduceOp::kMean && x.size() > 1)  // x / 1 == x
      kern.divide(out, static_cast<float>(x.size()), n);
  }

  // fn(task, i0, i1) over chunks of every task's `n` elements, on the pool when there is one.
  template <typename Task, typename Fn>
  void for_chunks(const std::vector<Task>& tasks, const Fn& fn) {
    constexpr std::int64_t kChunk = 16384;  // 64 KiB of float: the sums stay in L2
    std::vector<std::pair<std::size_t, std::int64_t>> chunks;  // (task, first element)
    for (std::size_t t = 0; t < tasks.size(); ++t)
      for (std::int64_t i = 0; i < tasks[t].n; i += kChunk) chunks.emplace_back(t, i);
    parallel(static_cast<std::int64_t>(chunks.size()), [&](std::int64_t c) {
      const auto [t, i0] = chunks[static_cast<std::size_t>(c)];
      fn(tasks[t], i0, std::min(tasks[t].n, i0 + kChunk));
    });
  }

  void parallel(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
    if (pool_ != nullptr && pool_->size() > 1 && n > 1) {
      pool_->run(n, fn);
    } else {
      for (std::int64_t i = 0; i < n; ++i) fn(i);
    }
  }

  // dst[0, n_dst) = src[offset, offset + n_dst), zero past the end of src.
  static void copy_slice(const std::byte* src, std::int64_t n_src, std::int64_t offset,
                         std::byte* dst, std::int64_t n_dst, std::size_t e) {
    const std::int64_t avail = std::max<std::int64_t>(0, std::min(n_dst, n_src - offset));
    if (avail > 0)
      std::memcpy(dst, src + static_cast<std::size_t>(offset) * e,
                  static_cast<std::size_t>(avail) * e);
    if (avail < n_dst)
      std::memset(dst + static_cast<std::size_t>(avail) * e, 0,
                  static_cast<std::size_t>(n_dst - avail) * e);
  }

  std::int64_t factor_;
  std::vector<CollectiveBytes> bytes_;
  ThreadPool* pool_;
};

}  // namespace

std::unique_ptr<Collectives> make_in_process_collectives(std::int64_t replication_factor,
                                                         ThreadPool* pool) {
  return std::make_unique<InProcessCollectives>(replication_factor, pool);
}

}  // namespace popkit::engine
