// The in-process backend: all replicas live in this process; each group's reduction is
// summed into a scratch vector in replica order, then written to every member.
#include "engine/runtime/collectives.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "config/error.h"

namespace popkit::engine {
namespace {

class InProcessCollectives final : public Collectives {
 public:
  explicit InProcessCollectives(std::int64_t r) : factor_(r), bytes_(static_cast<std::size_t>(r)) {}

  void all_reduce(const ReplicaGrouping& g, ReduceOp op,
                  std::span<const ReplicaBuffer> tensors) override {
    const auto by_replica = index(tensors, "all_reduce");
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      const auto members = g.members(group);
      const ReplicaBuffer& first = *by_replica[static_cast<std::size_t>(members[0])];
      check_same(by_replica, members, first.nelms, "all_reduce");
      reduce(by_replica, members, first.nelms, op);
      for (const auto m : members) {
        const ReplicaBuffer& b = *by_replica[static_cast<std::size_t>(m)];
        std::memcpy(b.data, sum_.data(), static_cast<std::size_t>(b.nelms) * sizeof(float));
        count(m, ring_bytes(2, b.nelms * 4, g.group_size));
      }
    }
  }

  void reduce_scatter(const ReplicaGrouping& g, const ReplicaGrouping& shard, ReduceOp op,
                      std::span<const ReplicaBuffer> src,
                      std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "reduce_scatter");
    const auto dst_of = index(dst, "reduce_scatter");
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      const auto members = g.members(group);
      const std::int64_t n = src_of[static_cast<std::size_t>(members[0])]->nelms;
      check_same(src_of, members, n, "reduce_scatter");
      reduce(src_of, members, n, op);
      for (const auto m : members) {
        const ReplicaBuffer& d = *dst_of[static_cast<std::size_t>(m)];
        if (d.dtype != DType::kFloat32)
          throw Error("reduce_scatter: the destination must be float32");
        const std::int64_t k = shard.rank_in_group(m);
        copy_slice(reinterpret_cast<const std::byte*>(sum_.data()), n, k * d.nelms, d.data, d.nelms,
                   sizeof(float));
        count(m, ring_bytes(1, n * 4, g.group_size));
      }
    }
  }

  void all_gather(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                  std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "all_gather");
    const auto dst_of = index(dst, "all_gather");
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      const auto members = g.members(group);
      const ReplicaBuffer& s0 = *src_of[static_cast<std::size_t>(members[0])];
      const std::size_t e = elem_size(s0.dtype);
      check_same(src_of, members, s0.nelms, "all_gather");
      const std::size_t shard_bytes = static_cast<std::size_t>(s0.nelms) * e;
      gathered_.resize(shard_bytes * members.size());
      for (std::size_t k = 0; k < members.size(); ++k)
        std::memcpy(gathered_.data() + k * shard_bytes,
                    src_of[static_cast<std::size_t>(members[k])]->data, shard_bytes);
      for (const auto m : members) {
        const ReplicaBuffer& d = *dst_of[static_cast<std::size_t>(m)];
        if (d.dtype != s0.dtype) throw Error("all_gather: source and destination dtypes differ");
        if (static_cast<std::size_t>(d.nelms) * e > gathered_.size())
          throw Error("all_gather: destination of {} elements but the group's {} shards hold {}",
                      d.nelms, members.size(), gathered_.size() / e);
        std::memcpy(d.data, gathered_.data(), static_cast<std::size_t>(d.nelms) * e);
        count(m, shard_bytes * static_cast<std::uint64_t>(g.group_size - 1));
      }
    }
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

  // sum_ = x_m0 + x_m1 + ... in replica order; divided by the group size for a mean.
  void reduce(const std::vector<const ReplicaBuffer*>& by_replica,
              const std::vector<std::int64_t>& members, std::int64_t n, ReduceOp op) {
    sum_.assign(static_cast<std::size_t>(n), 0.0f);
    bool first = true;
    for (const auto m : members) {
      const ReplicaBuffer& b = *by_replica[static_cast<std::size_t>(m)];
      if (b.dtype != DType::kFloat32) throw Error("reductions need float32 tensors");
      const auto* x = reinterpret_cast<const float*>(b.data);
      if (first) {
        std::memcpy(sum_.data(), x, static_cast<std::size_t>(n) * sizeof(float));
        first = false;
      } else {
        for (std::int64_t i = 0; i < n; ++i) sum_[static_cast<std::size_t>(i)] += x[i];
      }
    }
    if (op == ReduceOp::kMean) {
      const auto size = static_cast<float>(members.size());
      for (auto& v : sum_) v /= size;
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
  std::vector<float> sum_;
  std::vector<std::byte> gathered_;
};

}  // namespace

std::unique_ptr<Collectives> make_in_process_collectives(std::int64_t replication_factor) {
  return std::make_unique<InProcessCollectives>(replication_factor);
}

}  // namespace popkit::engine
