// The direct algorithms of collectives.h, written once over a Transport (transport.h).
// Each call first lays out, on the calling thread, every transfer from one replica to
// another and counts its bytes, so bytes() and cross_process_bytes() are what the
// algorithm moves whatever carries it. A transfer between two replicas of this process
// is a copy, or a read of the sender's buffer in place when the receiver sums it; one to
// or from another process is a message of the transport. The sums and copies then run
// in pieces of 64 KiB on the pool. Every element is summed in replica order by the one
// kernel (reduce_terms), so results are the same for any cut, thread count or spread of
// the replicas over processes. Sums are written straight into the planned destination
// (no scratch inside the memory account); messages from another process land in a
// receive area of host memory (the network's buffers, not a replica's device memory).
// What a call keeps between laying out and running is O(R): a sum names its group and
// offset, not its R terms, and the all-gather's copies run a task per destination (a list
// of every (member, shard) pair was R x R entries, 62.9 MB at R 1024); only the messages
// to and from other processes are listed, one per transfer.
#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/thread_pool.h"
#include "engine/runtime/transport.h"

namespace popkit::engine {

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

namespace {

// Buffers by replica: those of the replicas hosted here, null for the others.
using Buffers = std::vector<const ReplicaBuffer*>;

// A sum in replica order into `out` (hosted here) of every member's `n` elements from
// `offset` in its buffer (`terms`, by replica), zero for `padding` elements past it. The
// terms of members elsewhere arrive in the receive area from `slot`, n floats each in
// member order. all_reduce's sums are copied to the other members hosted here
// (`copy_out`) and sent to those elsewhere.
struct Sum {
  std::int64_t owner = 0;
  float* out = nullptr;
  std::int64_t n = 0;
  std::int64_t padding = 0;
  const std::vector<std::int64_t>* members = nullptr;
  const Buffers* terms = nullptr;
  std::int64_t offset = 0;
  std::size_t slot = 0;
  bool copy_out = false;
};

// A message between this process and another: the sender's bytes, or where the
// receiver's land (null: slot `slot` of the receive area).
struct Message {
  std::int64_t from = 0, to = 0;
  std::byte* data = nullptr;
  std::size_t slot = 0;
  std::size_t bytes = 0;
};

// The messages of one round, and the floats of the receive area their receipts take.
struct Messages {
  std::vector<Message> list;
  std::size_t area = 0;
  void add(Message m) { list.push_back(m); }
};

// An all_gather's copies within this process, for one group: into the full tensor of
// each member at `targets` (positions in `members`), the shards of those at `sources`.
// The destinations are numbered across groups from `first`, a task each.
struct Gather {
  const std::vector<std::int64_t>* members = nullptr;
  std::vector<std::size_t> targets, sources;
  std::size_t shard_bytes = 0, want = 0;
  std::int64_t first = 0;
};

std::size_t elem_size(DType t) {
  return static_cast<std::size_t>(planner::dtype_size(t));
}

float* floats(const ReplicaBuffer& b) {
  if (b.dtype != DType::kFloat32) throw Error("reductions need float32 tensors");
  return reinterpret_cast<float*>(b.data);
}

class DirectCollectives final : public Collectives {
 public:
  DirectCollectives(std::int64_t factor, std::unique_ptr<Transport> transport, ThreadPool* pool)
      : factor_(factor),
        transport_(std::move(transport)),
        hosted_(transport_->hosted()),
        pool_(pool),
        sent_(static_cast<std::size_t>(factor)),
        received_(static_cast<std::size_t>(factor)),
        cross_sent_(static_cast<std::size_t>(factor)),
        cross_received_(static_cast<std::size_t>(factor)) {}

  // Per owner chunk: every member's chunk to the owner, summed there, the sum back.
  void all_reduce(const ReplicaGrouping& g, ReduceOp op,
                  std::span<const ReplicaBuffer> tensors) override {
    const Buffers by = index(tensors, "all_reduce");
    const auto groups = local_groups(g);
    std::vector<Sum> sums;
    Messages to_owners, results;
    for (const auto& members : groups) {
      const std::int64_t n = common_nelms(by, members, "all_reduce");
      for (const auto m : members)
        if (hosts(m)) floats(*by[index_of(m)]);  // throws unless float32
      if (members.size() < 2) continue;          // the sum or mean of one tensor is itself
      const auto size = static_cast<std::int64_t>(members.size());
      for (std::int64_t k = 0; k < size; ++k) {
        const OwnerChunk c = owner_chunk(n, size, k);
        if (c.n == 0) continue;
        const std::int64_t owner = members[static_cast<std::size_t>(k)];
        const std::size_t bytes = static_cast<std::size_t>(c.n) * sizeof(float);
        auto chunk = [&](std::int64_t m) { return floats(*by[index_of(m)]) + c.first; };
        if (!hosts(owner)) {
          for (const auto m : members) {
            if (!hosts(m)) continue;
            to_owners.add({m, owner, as_bytes(chunk(m)), 0, bytes});
            results.add({owner, m, as_bytes(chunk(m)), 0, bytes});
            moved(m, owner, bytes);
            moved(owner, m, bytes);
          }
          continue;
        }
        sums.push_back({owner, chunk(owner), c.n, 0, &members, &by, c.first, to_owners.area, true});
        for (const auto m : members) {
          if (!hosts(m)) receive_term(m, owner, c.n, to_owners);
          moved(m, owner, bytes);
        }
        for (const auto m : members)
          if (m != owner) moved(owner, m, bytes);
      }
    }
    exchange(Round::kToOwner, to_owners);
    sum_pieces(sums, op);
    // The sums to the members elsewhere; the chunks owned elsewhere back from their owners.
    for (const Sum& s : sums)
      for (const auto m : *s.members)
        if (!hosts(m))
          results.add(
              {s.owner, m, as_bytes(s.out), 0, static_cast<std::size_t>(s.n) * sizeof(float)});
    exchange(Round::kFromOwner, results);
  }

  // Per shard: its slice of every member's tensor to the member holding it, summed there.
  void reduce_scatter(const ReplicaGrouping& g, const ReplicaGrouping& shard, ReduceOp op,
                      std::span<const ReplicaBuffer> src,
                      std::span<const ReplicaBuffer> dst) override {
    const Buffers src_of = index(src, "reduce_scatter");
    const Buffers dst_of = index(dst, "reduce_scatter");
    const auto groups = local_groups(g);
    std::vector<Sum> sums;
    Messages to_owners;
    for (const auto& members : groups) {
      const std::int64_t n = common_nelms(src_of, members, "reduce_scatter");
      const std::int64_t n_dst = common_nelms(dst_of, members, "reduce_scatter");
      for (const auto m : members)
        if (hosts(m)) floats(*src_of[index_of(m)]);  // throws unless float32
      for (const auto m : members) {
        const std::int64_t rank = shard.rank_in_group(m);
        const std::int64_t avail = shard_extent(n, n_dst, rank);  // the rest is padding
        const std::size_t bytes = static_cast<std::size_t>(avail) * sizeof(float);
        auto slice = [&](std::int64_t x) { return floats(*src_of[index_of(x)]) + rank * n_dst; };
        if (!hosts(m)) {
          for (const auto x : members)
            if (hosts(x)) {
              if (avail > 0) to_owners.add({x, m, as_bytes(slice(x)), 0, bytes});
              moved(x, m, bytes);
            }
          continue;
        }
        const ReplicaBuffer& d = *dst_of[index_of(m)];
        if (d.dtype != DType::kFloat32)
          throw Error("reduce_scatter: the destination must be float32");
        sums.push_back({m, reinterpret_cast<float*>(d.data), avail, n_dst - avail, &members,
                        &src_of, rank * n_dst, to_owners.area, false});
        for (const auto x : members) {
          if (avail > 0 && !hosts(x)) receive_term(x, m, avail, to_owners);
          moved(x, m, bytes);
        }
      }
    }
    exchange(Round::kToOwner, to_owners);
    sum_pieces(sums, op);
  }

  // Every member's shard to every other member, truncated to the destination.
  void all_gather(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                  std::span<const ReplicaBuffer> dst) override {
    const Buffers src_of = index(src, "all_gather");
    const Buffers dst_of = index(dst, "all_gather");
    const auto groups = local_groups(g);
    std::vector<Gather> gathers;
    std::int64_t n_targets = 0;
    Messages shards;
    for (const auto& members : groups) {
      const std::int64_t n_shard = common_nelms(src_of, members, "all_gather");
      const std::int64_t n_dst = common_nelms(dst_of, members, "all_gather");
      const DType dtype = first_hosted(src_of, members).dtype;
      const std::size_t e = elem_size(dtype);
      for (const auto m : members)
        if (hosts(m) && dst_of[index_of(m)]->dtype != dtype)
          throw Error("all_gather: source and destination dtypes differ");
      const auto size = static_cast<std::int64_t>(members.size());
      if (n_dst > n_shard * size)
        throw Error("all_gather: destination of {} elements but the group's {} shards hold {}",
                    n_dst, size, n_shard * size);
      Gather c{&members,
               {},
               {},
               static_cast<std::size_t>(n_shard) * e,
               static_cast<std::size_t>(n_dst) * e,
               n_targets};
      for (std::size_t k = 0; k < members.size(); ++k) {
        if (!hosts(members[k])) continue;
        c.targets.push_back(k);
        if (k * c.shard_bytes < c.want) c.sources.push_back(k);
      }
      for (const auto m : members)
        for (std::size_t k = 0; k < members.size(); ++k) {
          const std::int64_t from = members[k];
          const std::size_t at = k * c.shard_bytes;
          if (at >= c.want) break;  // the padded tail is not moved
          const std::size_t bytes = std::min(c.shard_bytes, c.want - at);
          const bool here = hosts(m), there = hosts(from);
          if (here && !there)
            shards.add({from, m, dst_of[index_of(m)]->data + at, 0, bytes});
          else if (there && !here)
            shards.add({from, m, src_of[index_of(from)]->data, 0, bytes});
          if (here || there) moved(from, m, bytes);
        }
      n_targets += static_cast<std::int64_t>(c.targets.size());
      gathers.push_back(std::move(c));
    }
    post(Round::kGather, shards);
    // A task per destination, not per (destination, shard): a pool's run holds a word
    // per task, R x R of them at a shard of one element.
    parallel(n_targets, [&](std::int64_t i) {
      // The group of destination i: the last whose first is not past it.
      const Gather& c =
          *(std::upper_bound(gathers.begin(), gathers.end(), i,
                             [](std::int64_t v, const Gather& x) { return v < x.first; }) -
            1);
      std::byte* to =
          dst_of[index_of((*c.members)[c.targets[static_cast<std::size_t>(i - c.first)]])]->data;
      for (const std::size_t k : c.sources) {
        const std::size_t at = k * c.shard_bytes;
        std::memcpy(to + at, src_of[index_of((*c.members)[k])]->data,
                    std::min(c.shard_bytes, c.want - at));
      }
    });
    transport_->wait();
  }

  void slice_shard(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                   std::span<const ReplicaBuffer> dst) override {
    const Buffers src_of = index(src, "slice_shard");
    const Buffers dst_of = index(dst, "slice_shard");
    for (std::int64_t r = hosted_.first; r < hosted_.first + hosted_.n; ++r)
      copy_shard(*src_of[index_of(r)], *dst_of[index_of(r)], g.rank_in_group(r));
  }

  [[nodiscard]] CollectiveBytes bytes(std::int64_t replica) const override {
    return {sent_[index_of(replica)], received_[index_of(replica)]};
  }
  [[nodiscard]] CollectiveBytes cross_process_bytes(std::int64_t replica) const override {
    return {cross_sent_[index_of(replica)], cross_received_[index_of(replica)]};
  }

 private:
  static constexpr std::int64_t kPiece = 16384;  // 64 KiB of float: a piece per task

  static std::size_t index_of(std::int64_t replica) { return static_cast<std::size_t>(replica); }
  static std::byte* as_bytes(float* p) { return reinterpret_cast<std::byte*>(p); }
  [[nodiscard]] bool hosts(std::int64_t replica) const { return hosted_.hosts(replica); }

  // The term replica `to` sums from replica `from`, hosted elsewhere: a message into the
  // next n floats of the receive area.
  static void receive_term(std::int64_t from, std::int64_t to, std::int64_t n, Messages& incoming) {
    incoming.add({from, to, nullptr, incoming.area, static_cast<std::size_t>(n) * sizeof(float)});
    incoming.area += static_cast<std::size_t>(n);
  }

  // Posts a step's messages: sent by a replica hosted here, or received by one; a
  // receipt into the receive area once the area has its size for this call.
  void post(Round round, Messages& messages) {
    if (area_.size() < messages.area) area_.resize(messages.area);
    for (Message& msg : messages.list) {
      if (msg.bytes == 0) continue;
      if (hosts(msg.from)) {
        transport_->send(msg.data, msg.bytes, msg.from, msg.to, round);
      } else {
        if (msg.data == nullptr) msg.data = as_bytes(area_.data() + msg.slot);
        transport_->receive(msg.data, msg.bytes, msg.from, msg.to, round);
      }
    }
    transport_->flush();
  }

  void exchange(Round round, Messages& messages) {
    post(round, messages);
    transport_->wait();
  }

  // Every sum, in pieces on the pool: the terms in replica order into `out`, then the
  // piece copied to the other members hosted here. Padding is zeroed first, not received.
  void sum_pieces(const std::vector<Sum>& sums, ReduceOp op) {
    std::vector<std::pair<std::size_t, std::int64_t>> pieces;  // (sum, first element)
    for (std::size_t k = 0; k < sums.size(); ++k) {
      const Sum& s = sums[k];
      if (s.padding > 0)
        std::memset(s.out + s.n, 0, static_cast<std::size_t>(s.padding) * sizeof(float));
      for (std::int64_t i = 0; i < s.n; i += kPiece) pieces.emplace_back(k, i);
    }
    parallel(static_cast<std::int64_t>(pieces.size()), [&](std::int64_t p) {
      const auto [k, i0] = pieces[static_cast<std::size_t>(p)];
      const Sum& s = sums[k];
      const std::int64_t count = std::min(s.n, i0 + kPiece) - i0;
      // The terms' addresses, made per piece so that a call holds O(R) of them per thread.
      thread_local std::vector<const float*> at;
      at.clear();
      std::size_t slot = s.slot;
      for (const auto m : *s.members) {
        if (hosts(m)) {
          at.push_back(floats(*(*s.terms)[index_of(m)]) + s.offset);
        } else {
          at.push_back(area_.data() + slot);
          slot += static_cast<std::size_t>(s.n);
        }
      }
      // One pass into `out` (no scratch: each element is read from every term, `out`'s
      // own among them, before it is written).
      reduce_terms(s.out + i0, at, i0, count, op);
      if (!s.copy_out) return;
      for (const auto m : *s.members)
        if (m != s.owner && hosts(m))
          std::memcpy(floats(*(*s.terms)[index_of(m)]) + s.offset + i0, s.out + i0,
                      static_cast<std::size_t>(count) * sizeof(float));
    });
  }

  void parallel(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
    if (pool_ != nullptr && pool_->size() > 1 && n > 1) {
      pool_->run(n, fn);
    } else {
      for (std::int64_t i = 0; i < n; ++i) fn(i);
    }
  }

  // Bytes from replica `from` to replica `to`, counted at the ends hosted here; a
  // transfer within one replica counts nothing.
  void moved(std::int64_t from, std::int64_t to, std::size_t bytes) {
    if (from == to) return;
    const bool cross = transport_->process_of(from) != transport_->process_of(to);
    if (hosts(from)) {
      sent_[index_of(from)] += bytes;
      if (cross) cross_sent_[index_of(from)] += bytes;
    }
    if (hosts(to)) {
      received_[index_of(to)] += bytes;
      if (cross) cross_received_[index_of(to)] += bytes;
    }
  }

  // Buffers by replica: exactly one for every replica hosted here.
  Buffers index(std::span<const ReplicaBuffer> bufs, const char* what) const {
    Buffers out(static_cast<std::size_t>(factor_), nullptr);
    for (const auto& b : bufs) {
      if (!hosts(b.replica) || out[index_of(b.replica)])
        throw Error(
            "{}: replica {} given twice or not hosted here (this process hosts {} to {} "
            "of R = {})",
            what, b.replica, hosted_.first, hosted_.first + hosted_.n - 1, factor_);
      out[index_of(b.replica)] = &b;
    }
    for (std::int64_t r = hosted_.first; r < hosted_.first + hosted_.n; ++r)
      if (!out[index_of(r)])
        throw Error("{}: no buffer for replica {} (this process hosts {} to {} of R = {})", what, r,
                    hosted_.first, hosted_.first + hosted_.n - 1, factor_);
    return out;
  }

  // The groups with a member hosted here, each in replica order.
  std::vector<std::vector<std::int64_t>> local_groups(const ReplicaGrouping& g) const {
    std::vector<std::vector<std::int64_t>> out;
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      auto members = g.members(group);
      if (std::any_of(members.begin(), members.end(), [&](std::int64_t m) { return hosts(m); }))
        out.push_back(std::move(members));
    }
    return out;
  }

  const ReplicaBuffer& first_hosted(const Buffers& by,
                                    const std::vector<std::int64_t>& members) const {
    for (const auto m : members)
      if (hosts(m)) return *by[index_of(m)];
    POPKIT_ASSERT(false);
    return *by[0];
  }

  // The elements of the group's tensors, the same on every member hosted here (members
  // elsewhere run the same plan, so have the same shapes).
  std::int64_t common_nelms(const Buffers& by, const std::vector<std::int64_t>& members,
                            const char* what) const {
    const ReplicaBuffer& first = first_hosted(by, members);
    for (const auto m : members)
      if (hosts(m) && by[index_of(m)]->nelms != first.nelms)
        throw Error("{}: replica {} gives {} elements but replica {} gives {}", what, m,
                    by[index_of(m)]->nelms, first.replica, first.nelms);
    return first.nelms;
  }

  std::int64_t factor_;
  std::unique_ptr<Transport> transport_;
  HostedReplicas hosted_;
  ThreadPool* pool_;
  std::vector<float> area_;  // where messages from other processes land
  std::vector<std::uint64_t> sent_, received_, cross_sent_, cross_received_;
};

}  // namespace

std::unique_ptr<Collectives> make_direct_collectives(std::int64_t replication_factor,
                                                     std::unique_ptr<Transport> transport,
                                                     ThreadPool* pool) {
  return std::make_unique<DirectCollectives>(replication_factor, std::move(transport), pool);
}

}  // namespace popkit::engine
