// The OpenMPI world and its collectives. Each rank runs the direct algorithms of
// collectives.h for the replicas it hosts: a transfer between two replicas of this rank
// is a memcpy, one between ranks a nonblocking MPI message, so every replica sends and
// receives the same bytes as in one process, and every reduction adds its terms in
// replica order with the same kernel: the results are bitwise those of one process.
// Messages from other ranks land in a receive area of host memory (the network's
// buffers, not the replica's device memory, so the memory account is unchanged), and
// the owner sums from there straight into its planned destination.
//
// Only the thread that drives the engine calls MPI (MPI_THREAD_FUNNELED).
#include "engine/runtime/mpi_world.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "base/error.h"
#include "engine/runtime/world.h"

namespace popkit::engine::mpi {
namespace {

bool g_started = false;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error("MPI: {} failed: {}", what, std::string(text, static_cast<std::size_t>(len)));
}

int as_count(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error("MPI: {} of {} bytes is more than one message carries (2^31 - 1)", what, n);
  return static_cast<int>(n);
}

std::size_t elem_size(DType t) {
  return static_cast<std::size_t>(planner::dtype_size(t));
}

// The messages of one step of an algorithm: posted together, completed together.
class Exchange {
 public:
  void send(const void* data, std::size_t bytes, int to, int tag) {
    if (bytes == 0) return;
    requests_.emplace_back();
    check(MPI_Isend(data, as_count(bytes, "a message"), MPI_BYTE, to, tag, MPI_COMM_WORLD,
                    &requests_.back()),
          "MPI_Isend");
  }
  void receive(void* data, std::size_t bytes, int from, int tag) {
    if (bytes == 0) return;
    requests_.emplace_back();
    check(MPI_Irecv(data, as_count(bytes, "a message"), MPI_BYTE, from, tag, MPI_COMM_WORLD,
                    &requests_.back()),
          "MPI_Irecv");
  }
  void wait() {
    if (requests_.empty()) return;
    check(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
    requests_.clear();
  }

 private:
  std::vector<MPI_Request> requests_;
};

class MpiCollectives final : public Collectives {
 public:
  MpiCollectives(std::int64_t factor, int rank, int n_ranks)
      : factor_(factor),
        n_ranks_(n_ranks),
        hosted_(hosted_replicas(factor, rank, n_ranks)),
        sent_(static_cast<std::size_t>(factor)),
        received_(static_cast<std::size_t>(factor)),
        cross_sent_(static_cast<std::size_t>(factor)),
        cross_received_(static_cast<std::size_t>(factor)) {
    int* ub = nullptr;
    int found = 0;
    check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found), "MPI_Comm_get_attr");
    const std::int64_t need = 3 * factor * factor;
    if (found && ub != nullptr && need > *ub)
      throw Error("MPI: {} replicas need message tags up to {}, but this MPI allows {}", factor,
                  need, *ub);
  }

  void all_reduce(const ReplicaGrouping& g, ReduceOp op,
                  std::span<const ReplicaBuffer> tensors) override {
    const auto by = index(tensors, "all_reduce");
    // The owners' chunks to sum, once every contribution has arrived.
    struct Sum {
      float* own;
      std::vector<const float*> terms;  // in replica order
      std::int64_t n;
      std::int64_t owner;
      std::vector<std::int64_t> members;
      std::int64_t first;
    };
    std::vector<Sum> sums;
    std::size_t area = 0;  // floats of the receive area
    const auto groups = local_groups(g);
    // First pass: the receive area's size, so its pointers stay put.
    for (const auto& members : groups) {
      const std::int64_t n = local_nelms(by, members, "all_reduce");
      const auto size = static_cast<std::int64_t>(members.size());
      if (size < 2) continue;
      for (std::int64_t k = 0; k < size; ++k) {
        if (!hosted_.hosts(members[static_cast<std::size_t>(k)])) continue;
        const OwnerChunk c = owner_chunk(n, size, k);
        for (const auto m : members)
          if (!hosted_.hosts(m)) area += static_cast<std::size_t>(c.n);
      }
    }
    area_.resize(std::max(area_.size(), area));
    std::size_t at = 0;
    Exchange in;
    for (const auto& members : groups) {
      const std::int64_t n = local_nelms(by, members, "all_reduce");
      const auto size = static_cast<std::int64_t>(members.size());
      if (size < 2) continue;
      for (std::int64_t k = 0; k < size; ++k) {
        const OwnerChunk c = owner_chunk(n, size, k);
        if (c.n == 0) continue;
        const std::int64_t owner = members[static_cast<std::size_t>(k)];
        const std::size_t bytes = static_cast<std::size_t>(c.n) * sizeof(float);
        if (hosted_.hosts(owner)) {
          Sum s{chunk(by, owner, c.first), {}, c.n, owner, members, c.first};
          for (const auto m : members) {
            if (hosted_.hosts(m)) {
              s.terms.push_back(chunk(by, m, c.first));
            } else {
              float* slot = area_.data() + at;
              at += static_cast<std::size_t>(c.n);
              in.receive(slot, bytes, rank_of(m), tag(0, m, owner));
              s.terms.push_back(slot);
            }
            moved(m, owner, bytes);
          }
          sums.push_back(std::move(s));
        } else {
          for (const auto m : members)
            if (hosted_.hosts(m)) {
              in.send(chunk(by, m, c.first), bytes, rank_of(owner), tag(0, m, owner));
              moved(m, owner, bytes);
            }
        }
      }
    }
    in.wait();
    Exchange out;
    for (const Sum& s : sums) {
      reduce_terms(s.own, s.terms, 0, s.n, op);
      const std::size_t bytes = static_cast<std::size_t>(s.n) * sizeof(float);
      for (const auto m : s.members) {
        if (m == s.owner) continue;
        if (hosted_.hosts(m))
          std::memcpy(chunk(by, m, s.first), s.own, bytes);
        else
          out.send(s.own, bytes, rank_of(m), tag(1, s.owner, m));
        moved(s.owner, m, bytes);
      }
    }
    // The chunks other ranks own come back into this rank's members.
    for (const auto& members : groups) {
      const std::int64_t n = local_nelms(by, members, "all_reduce");
      const auto size = static_cast<std::int64_t>(members.size());
      if (size < 2) continue;
      for (std::int64_t k = 0; k < size; ++k) {
        const std::int64_t owner = members[static_cast<std::size_t>(k)];
        if (hosted_.hosts(owner)) continue;
        const OwnerChunk c = owner_chunk(n, size, k);
        const std::size_t bytes = static_cast<std::size_t>(c.n) * sizeof(float);
        for (const auto m : members)
          if (hosted_.hosts(m)) {
            out.receive(chunk(by, m, c.first), bytes, rank_of(owner), tag(1, owner, m));
            moved(owner, m, bytes);
          }
      }
    }
    out.wait();
  }

  void reduce_scatter(const ReplicaGrouping& g, const ReplicaGrouping& shard, ReduceOp op,
                      std::span<const ReplicaBuffer> src,
                      std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "reduce_scatter");
    const auto dst_of = index(dst, "reduce_scatter");
    struct Sum {
      float* dst;
      std::int64_t n_dst, n;
      std::vector<const float*> terms;
    };
    std::vector<Sum> sums;
    const auto groups = local_groups(g);
    std::size_t area = 0;
    for (const auto& members : groups) {
      const std::int64_t n = local_nelms(src_of, members, "reduce_scatter");
      const std::int64_t n_dst = local_nelms(dst_of, members, "reduce_scatter");
      for (const auto m : members) {
        if (!hosted_.hosts(m)) continue;
        const std::int64_t avail = shard_extent(n, n_dst, shard.rank_in_group(m));
        for (const auto x : members)
          if (!hosted_.hosts(x)) area += static_cast<std::size_t>(avail);
      }
    }
    area_.resize(std::max(area_.size(), area));
    std::size_t at = 0;
    Exchange in;
    for (const auto& members : groups) {
      const std::int64_t n = local_nelms(src_of, members, "reduce_scatter");
      const std::int64_t n_dst = local_nelms(dst_of, members, "reduce_scatter");
      for (const auto m : members) {
        const std::int64_t offset = shard.rank_in_group(m) * n_dst;
        const std::int64_t avail = shard_extent(n, n_dst, shard.rank_in_group(m));
        const std::size_t bytes = static_cast<std::size_t>(avail) * sizeof(float);
        if (hosted_.hosts(m)) {
          const ReplicaBuffer& d = *dst_of[static_cast<std::size_t>(m)];
          if (d.dtype != DType::kFloat32)
            throw Error("reduce_scatter: the destination must be float32");
          Sum s{reinterpret_cast<float*>(d.data), n_dst, avail, {}};
          for (const auto x : members) {
            if (avail == 0) break;
            if (hosted_.hosts(x)) {
              s.terms.push_back(floats(src_of, x) + offset);
            } else {
              float* slot = area_.data() + at;
              at += static_cast<std::size_t>(avail);
              in.receive(slot, bytes, rank_of(x), tag(0, x, m));
              s.terms.push_back(slot);
            }
            moved(x, m, bytes);
          }
          sums.push_back(std::move(s));
        } else {
          for (const auto x : members)
            if (hosted_.hosts(x)) {
              in.send(floats(src_of, x) + offset, bytes, rank_of(m), tag(0, x, m));
              moved(x, m, bytes);
            }
        }
      }
    }
    in.wait();
    for (const Sum& s : sums) {
      if (s.n > 0) reduce_terms(s.dst, s.terms, 0, s.n, op);
      if (s.n < s.n_dst)  // padding: zero, nothing received
        std::memset(s.dst + s.n, 0, static_cast<std::size_t>(s.n_dst - s.n) * sizeof(float));
    }
  }

  void all_gather(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                  std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "all_gather");
    const auto dst_of = index(dst, "all_gather");
    Exchange ex;
    for (const auto& members : local_groups(g)) {
      const ReplicaBuffer& s0 = *any_local(src_of, members);
      const std::size_t e = elem_size(s0.dtype);
      const std::size_t shard_bytes = static_cast<std::size_t>(s0.nelms) * e;
      const std::size_t want =
          static_cast<std::size_t>(local_nelms(dst_of, members, "all_gather")) * e;
      if (want > shard_bytes * members.size())
        throw Error("all_gather: destination of {} bytes but the group's {} shards hold {}", want,
                    members.size(), shard_bytes * members.size());
      for (const auto m : members) {
        for (std::size_t k = 0; k < members.size(); ++k) {
          const std::int64_t from = members[k];
          const std::size_t at = k * shard_bytes;
          if (at >= want) break;  // the padded tail is not moved
          const std::size_t bytes = std::min(shard_bytes, want - at);
          const bool here = hosted_.hosts(m), there = hosted_.hosts(from);
          if (here && there) {
            std::memcpy(dst_of[static_cast<std::size_t>(m)]->data + at,
                        src_of[static_cast<std::size_t>(from)]->data, bytes);
          } else if (here) {
            ex.receive(dst_of[static_cast<std::size_t>(m)]->data + at, bytes, rank_of(from),
                       tag(2, from, m));
          } else if (there) {
            ex.send(src_of[static_cast<std::size_t>(from)]->data, bytes, rank_of(m),
                    tag(2, from, m));
          }
          if (here || there) moved(from, m, bytes);
        }
      }
    }
    ex.wait();
  }

  void slice_shard(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                   std::span<const ReplicaBuffer> dst) override {
    const auto src_of = index(src, "slice_shard");
    const auto dst_of = index(dst, "slice_shard");
    for (std::int64_t r = hosted_.first; r < hosted_.first + hosted_.n; ++r)
      copy_shard(*src_of[static_cast<std::size_t>(r)], *dst_of[static_cast<std::size_t>(r)],
                 g.rank_in_group(r));
  }

  CollectiveBytes bytes(std::int64_t replica) const override {
    const auto r = static_cast<std::size_t>(replica);
    return {sent_[r], received_[r]};
  }
  CollectiveBytes cross_process_bytes(std::int64_t replica) const override {
    const auto r = static_cast<std::size_t>(replica);
    return {cross_sent_[r], cross_received_[r]};
  }

 private:
  int rank_of(std::int64_t replica) const { return rank_of_replica(replica, factor_, n_ranks_); }

  // Tags tell apart the messages between two ranks within one call: the algorithm's
  // step, and the replicas at both ends (MPI keeps the order of messages with one tag).
  int tag(int step, std::int64_t from, std::int64_t to) const {
    return static_cast<int>((step * factor_ + from) * factor_ + to);
  }

  // Counted at this rank's end of a transfer; a transfer within one replica counts nothing.
  void moved(std::int64_t from, std::int64_t to, std::size_t bytes) {
    if (from == to) return;
    const bool cross = rank_of(from) != rank_of(to);
    if (hosted_.hosts(from)) {
      sent_[static_cast<std::size_t>(from)] += bytes;
      if (cross) cross_sent_[static_cast<std::size_t>(from)] += bytes;
    }
    if (hosted_.hosts(to)) {
      received_[static_cast<std::size_t>(to)] += bytes;
      if (cross) cross_received_[static_cast<std::size_t>(to)] += bytes;
    }
  }

  // Buffers by replica: exactly the replicas this rank hosts.
  std::vector<const ReplicaBuffer*> index(std::span<const ReplicaBuffer> bufs,
                                          const char* what) const {
    std::vector<const ReplicaBuffer*> out(static_cast<std::size_t>(factor_), nullptr);
    for (const auto& b : bufs) {
      if (!hosted_.hosts(b.replica) || out[static_cast<std::size_t>(b.replica)])
        throw Error("{}: replica {} given twice or not hosted by this rank (it hosts {} to {})",
                    what, b.replica, hosted_.first, hosted_.first + hosted_.n - 1);
      out[static_cast<std::size_t>(b.replica)] = &b;
    }
    for (std::int64_t r = hosted_.first; r < hosted_.first + hosted_.n; ++r)
      if (!out[static_cast<std::size_t>(r)]) throw Error("{}: no buffer for replica {}", what, r);
    return out;
  }

  // The groups with a member on this rank, each in replica order.
  std::vector<std::vector<std::int64_t>> local_groups(const ReplicaGrouping& g) const {
    std::vector<std::vector<std::int64_t>> out;
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      auto members = g.members(group);
      if (std::any_of(members.begin(), members.end(),
                      [&](std::int64_t m) { return hosted_.hosts(m); }))
        out.push_back(std::move(members));
    }
    return out;
  }

  const ReplicaBuffer* any_local(const std::vector<const ReplicaBuffer*>& by,
                                 const std::vector<std::int64_t>& members) const {
    for (const auto m : members)
      if (hosted_.hosts(m)) return by[static_cast<std::size_t>(m)];
    POPKIT_ASSERT(false);
    return nullptr;
  }

  // The elements of the group's tensors, the same on every member hosted here (members
  // elsewhere have the same plan, so the same shapes).
  std::int64_t local_nelms(const std::vector<const ReplicaBuffer*>& by,
                           const std::vector<std::int64_t>& members, const char* what) const {
    const ReplicaBuffer* first = any_local(by, members);
    for (const auto m : members)
      if (hosted_.hosts(m) && by[static_cast<std::size_t>(m)]->nelms != first->nelms)
        throw Error("{}: replica {} gives {} elements but replica {} gives {}", what, m,
                    by[static_cast<std::size_t>(m)]->nelms, first->replica, first->nelms);
    return first->nelms;
  }

  static float* floats(const std::vector<const ReplicaBuffer*>& by, std::int64_t r) {
    const ReplicaBuffer& b = *by[static_cast<std::size_t>(r)];
    if (b.dtype != DType::kFloat32) throw Error("reductions need float32 tensors");
    return reinterpret_cast<float*>(b.data);
  }
  static float* chunk(const std::vector<const ReplicaBuffer*>& by, std::int64_t r,
                      std::int64_t first) {
    return floats(by, r) + first;
  }

  std::int64_t factor_;
  int n_ranks_;
  HostedReplicas hosted_;
  std::vector<float> area_;  // where messages from other ranks land before they are summed
  std::vector<std::uint64_t> sent_, received_, cross_sent_, cross_received_;
};

class MpiWorld final : public World {
 public:
  MpiWorld() {
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
          "MPI_Comm_split_type");
    check(MPI_Comm_size(local, &local_size_), "MPI_Comm_size");
    MPI_Comm_free(&local);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }

  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override {
    const long long n = static_cast<long long>(mine.size());
    std::vector<long long> sizes(static_cast<std::size_t>(size_));
    check(MPI_Allgather(&n, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD),
          "MPI_Allgather");
    std::vector<int> counts, displs;
    long long total = 0;
    for (const long long s : sizes) {
      counts.push_back(as_count(static_cast<std::size_t>(s), "a gathered part"));
      displs.push_back(as_count(static_cast<std::size_t>(total), "a gather"));
      total += s;
    }
    std::vector<std::byte> all(static_cast<std::size_t>(total));
    check(MPI_Allgatherv(mine.data(), static_cast<int>(n), MPI_BYTE, all.data(), counts.data(),
                         displs.data(), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::vector<std::byte>> out;
    for (std::size_t k = 0; k < sizes.size(); ++k)
      out.emplace_back(all.begin() + displs[k], all.begin() + displs[k] + counts[k]);
    return out;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  std::unique_ptr<Collectives> make_collectives(std::int64_t replication_factor,
                                                ThreadPool*) override {
    return std::make_unique<MpiCollectives>(replication_factor, rank_, size_);
  }

  std::string library() const override { return library_version(); }

 private:
  int rank_ = 0, size_ = 1, local_size_ = 1;
};

}  // namespace

std::shared_ptr<World> start(int& argc, char**& argv) {
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  g_started = true;
  // Errors come back as codes, and check() turns them into popkit::Error.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::make_shared<MpiWorld>();
}

bool started() {
  return g_started;
}

void finish() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_started && !finalized) MPI_Finalize();
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<std::size_t>(len));
  // "Open MPI v4.1.4, package: ..., ident: ..." -> "Open MPI v4.1.4"
  if (const auto comma = v.find(','); comma != std::string::npos) v.resize(comma);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

}  // namespace popkit::engine::mpi
