// The direct algorithms of collectives.h, written once over a Transport (transport.h).
// Each call first lays out, on the calling thread, every transfer from one replica to
// another and counts its bytes (per group, not per pair), so bytes() and
// cross_process_bytes() are what the algorithm moves whatever carries it. A transfer
// between two replicas of this process is a copy, or a read of the sender's buffer in
// place when the receiver sums it; one to or from another process is a message of the
// transport, except that an all-gather's shard, the same for every member, crosses to a
// process once and is copied there. The sums and copies then run
// in pieces of 64 KiB on the pool. Every element is summed in replica order by the one
// kernel (reduce_terms), so results are the same for any cut, thread count or spread of
// the replicas over processes. Sums are written straight into the planned destination
// (no scratch inside the memory account; a group's small sums pass through a thread's
// scratch outside it: group_sums.h); messages from another process land in a
// receive area of host memory (the network's buffers, not a replica's device memory).
// What a call keeps between laying out and running is O(R): a sum names its group and
// offset, not its R terms, and the all-gather's copies run a task per destination (a list
// of every (member, shard) pair was R x R entries, 62.9 MB at R 1024); only the messages
// to and from other processes are listed.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/group_sums.h"
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

using Buffers = BuffersByReplica;

// An all_reduce's sum owned elsewhere: landed in the chunk of the first member hosted
// here (`here`), from `first` for `n` floats, and copied to the others.
struct Fan {
  const std::vector<std::int64_t>* here = nullptr;
  std::int64_t first = 0;
  std::int64_t n = 0;
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
  // Empty, keeping the list's memory: at R 4096 over 2 ranks a call lists millions of
  // messages, and memory new each call was a tenth of its time in page faults.
  Messages& reset() {
    list.clear();
    area = 0;
    return *this;
  }
};

// An all_gather's copies into the full tensor of each member hosted here (`targets`,
// positions in `members`) from every shard it takes (`sources`): a shard hosted here is
// read in place, one from elsewhere from the receive area, where it landed once for all
// the members hosted here. The first target assembles the tensor; the others copy it,
// numbered across groups from `first`.
struct Gather {
  struct Source {
    std::size_t k = 0;                // the shard's position in `members`
    const std::byte* data = nullptr;  // null: from slot `slot` of the receive area
    std::size_t slot = 0;
  };
  const std::vector<std::int64_t>* members = nullptr;
  std::vector<std::size_t> targets;
  std::vector<Source> sources;
  std::size_t shard_bytes = 0, want = 0;
  std::int64_t first = 0;
};

std::size_t elem_size(DType t) {
  return static_cast<std::size_t>(planner::dtype_size(t));
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

  // Per owner chunk: every member's chunk to the owner, summed there, the sum back; a
  // sum crosses to another process once, like an all_gather's shard.
  void all_reduce(const ReplicaGrouping& g, ReduceOp op,
                  std::span<const ReplicaBuffer> tensors) override {
    const Buffers by = index(tensors, "all_reduce");
    const auto groups = local_groups(g);
    std::vector<Sum> sums;
    std::vector<Fan> fans;
    // Per group: its members hosted here, and its first member on each other process.
    std::vector<std::vector<std::int64_t>> heres, firsts;
    heres.reserve(groups.size());
    firsts.reserve(groups.size());
    Messages& to_owners = lists_[0].reset();
    Messages& results = lists_[1].reset();
    for (const auto& members : groups) {
      const std::int64_t n = common_nelms(by, members, "all_reduce");
      for (const auto m : members)
        if (hosts(m)) floats(*by[index_of(m)]);  // throws unless float32
      if (members.size() < 2) continue;          // the sum or mean of one tensor is itself
      const auto size = static_cast<std::int64_t>(members.size());
      const std::vector<std::int64_t>& here = heres.emplace_back(hosted_members(members));
      const std::vector<std::int64_t>& elsewhere = firsts.emplace_back(firsts_elsewhere(members));
      auto chunk = [&](std::int64_t m, std::int64_t at) { return floats(*by[index_of(m)]) + at; };
      std::vector<std::size_t> chunk_bytes(members.size(), 0);
      std::vector<std::int64_t> chunk_first(members.size(), 0);
      const std::size_t group_sums = sums.size();
      std::size_t owned = 0;  // floats of the chunks owned here: a row of the area
      for (std::int64_t k = 0; k < size; ++k) {
        const OwnerChunk c = owner_chunk(n, size, k);
        if (c.n == 0) continue;
        const auto ik = static_cast<std::size_t>(k);
        const std::int64_t owner = members[ik];
        chunk_bytes[ik] = static_cast<std::size_t>(c.n) * sizeof(float);
        chunk_first[ik] = c.first;
        if (!hosts(owner)) {
          results.add(
              {owner, here.front(), as_bytes(chunk(here.front(), c.first)), 0, chunk_bytes[ik]});
          if (here.size() > 1) fans.push_back({&here, c.first, c.n});
          continue;
        }
        sums.push_back({owner, chunk(owner, c.first), c.n, 0, &members, &by, c.first,
                        to_owners.area + owned, 0, true, &elsewhere});
        owned += static_cast<std::size_t>(c.n);
      }
      // Each member's chunks to their owners elsewhere, then the terms of the members
      // elsewhere for the sums here: (from, to) order, one block per member and process.
      const std::vector<std::size_t> owners = owned_elsewhere(members, chunk_bytes);
      for (const auto m : here)
        for (const std::size_t k : owners)
          to_owners.add({m, members[k], as_bytes(chunk(m, chunk_first[k])), 0, chunk_bytes[k]});
      receive_terms(members, sums, group_sums, owned, to_owners);
      moved(Way::kToEach, members, chunk_bytes);
      moved(Way::kFromEach, members, chunk_bytes);
    }
    exchange(Round::kToOwner, to_owners);
    sum_pieces(sums, op);
    for (const Sum& s : sums)
      for (const auto to : *s.firsts)
        results.add(
            {s.owner, to, as_bytes(s.out), 0, static_cast<std::size_t>(s.n) * sizeof(float)});
    exchange(Round::kFromOwner, results);
    // The sums owned elsewhere, from the first member here to the others.
    parallel(static_cast<std::int64_t>(fans.size()), [&](std::int64_t i) {
      const Fan& f = fans[static_cast<std::size_t>(i)];
      const float* from = floats(*by[index_of(f.here->front())]) + f.first;
      for (std::size_t j = 1; j < f.here->size(); ++j)
        std::memcpy(floats(*by[index_of((*f.here)[j])]) + f.first, from,
                    static_cast<std::size_t>(f.n) * sizeof(float));
    });
  }

  // Per shard: its slice of every member's tensor to the member holding it, summed there.
  void reduce_scatter(const ReplicaGrouping& g, const ReplicaGrouping& shard, ReduceOp op,
                      std::span<const ReplicaBuffer> src,
                      std::span<const ReplicaBuffer> dst) override {
    const Buffers src_of = index(src, "reduce_scatter");
    const Buffers dst_of = index(dst, "reduce_scatter");
    const auto groups = local_groups(g);
    std::vector<Sum> sums;
    Messages& to_owners = lists_[0].reset();
    for (const auto& members : groups) {
      const std::int64_t n = common_nelms(src_of, members, "reduce_scatter");
      const std::int64_t n_dst = common_nelms(dst_of, members, "reduce_scatter");
      for (const auto m : members)
        if (hosts(m)) floats(*src_of[index_of(m)]);  // throws unless float32
      const std::vector<std::int64_t> here = hosted_members(members);
      std::vector<std::size_t> slice_bytes(members.size(), 0);
      std::vector<std::int64_t> slice_at(members.size(), 0);
      const std::size_t group_sums = sums.size();
      std::size_t owned = 0;  // floats of the shards owned here: a row of the area
      for (std::size_t k = 0; k < members.size(); ++k) {
        const std::int64_t m = members[k];
        const std::int64_t rank = shard.rank_in_group(m);
        const std::int64_t avail = shard_extent(n, n_dst, rank);  // the rest is padding
        slice_bytes[k] = static_cast<std::size_t>(avail) * sizeof(float);
        slice_at[k] = rank * n_dst;
        if (!hosts(m)) continue;
        const ReplicaBuffer& d = *dst_of[index_of(m)];
        if (d.dtype != DType::kFloat32)
          throw Error("reduce_scatter: the destination must be float32");
        sums.push_back({m, reinterpret_cast<float*>(d.data), avail, n_dst - avail, &members,
                        &src_of, rank * n_dst, to_owners.area + owned, 0, false, nullptr});
        owned += static_cast<std::size_t>(avail);
      }
      // Each member's slices to their owners elsewhere, then the terms of the members
      // elsewhere for the sums here: (from, to) order, one block per member and process.
      const std::vector<std::size_t> owners = owned_elsewhere(members, slice_bytes);
      for (const auto x : here)
        for (const std::size_t k : owners)
          to_owners.add({x, members[k], as_bytes(floats(*src_of[index_of(x)]) + slice_at[k]), 0,
                         slice_bytes[k]});
      receive_terms(members, sums, group_sums, owned, to_owners);
      moved(Way::kToEach, members, slice_bytes);
    }
    exchange(Round::kToOwner, to_owners);
    sum_pieces(sums, op);
  }

  // Every member's shard to every other member, truncated to the destination. A shard
  // crosses to another process once, to the group's first member there, and is copied
  // from where it lands to every member hosted there: all of them take the same bytes.
  void all_gather(const ReplicaGrouping& g, std::span<const ReplicaBuffer> src,
                  std::span<const ReplicaBuffer> dst) override {
    const Buffers src_of = index(src, "all_gather");
    const Buffers dst_of = index(dst, "all_gather");
    const auto groups = local_groups(g);
    std::vector<Gather> gathers;
    std::int64_t n_copies = 0;  // the targets after each group's first
    Messages& shards = lists_[0].reset();
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
               n_copies};
      for (std::size_t k = 0; k < members.size(); ++k)
        if (hosts(members[k])) c.targets.push_back(k);
      // Where this process's shards go: the group's first member on each other process.
      const std::vector<std::int64_t> firsts = firsts_elsewhere(members);
      const std::int64_t first_here = members[c.targets.front()];
      std::vector<std::size_t> shard_bytes(members.size(), 0);
      for (std::size_t k = 0; k < members.size(); ++k) {
        const std::size_t at = k * c.shard_bytes;
        if (at >= c.want) break;  // the padded tail is not moved
        const std::size_t bytes = std::min(c.shard_bytes, c.want - at);
        shard_bytes[k] = bytes;
        const std::int64_t from = members[k];
        if (hosts(from)) {
          c.sources.push_back({k, src_of[index_of(from)]->data, 0});
          for (const auto to : firsts)
            shards.add({from, to, src_of[index_of(from)]->data, 0, bytes});
        } else {
          c.sources.push_back({k, nullptr, shards.area});
          shards.add({from, first_here, nullptr, shards.area, bytes});
          shards.area += (bytes + sizeof(float) - 1) / sizeof(float);
        }
      }
      moved(Way::kFromEach, members, shard_bytes);
      n_copies += static_cast<std::int64_t>(c.targets.size()) - 1;
      gathers.push_back(std::move(c));
    }
    exchange(Round::kGather, shards);
    // The first member here of each group assembles the tensor from the shards, a task
    // per group; the others copy it whole, a task each. A copy per member and shard was R
    // x R copies: at R 65,536, 134 million of 4 bytes for a tensor of 2,048 elements.
    const auto target = [&](const Gather& c, std::size_t t) {
      return dst_of[index_of((*c.members)[c.targets[t]])]->data;
    };
    parallel(static_cast<std::int64_t>(gathers.size()), [&](std::int64_t i) {
      const Gather& c = gathers[static_cast<std::size_t>(i)];
      std::byte* to = target(c, 0);
      for (const Gather::Source& s : c.sources) {
        const std::size_t at = s.k * c.shard_bytes;
        const std::byte* from =
            s.data != nullptr ? s.data : reinterpret_cast<const std::byte*>(area_.data() + s.slot);
        std::memcpy(to + at, from, std::min(c.shard_bytes, c.want - at));
      }
    });
    parallel(n_copies, [&](std::int64_t i) {
      // The group of copy i: the last whose first is not past it.
      const Gather& c =
          *(std::upper_bound(gathers.begin(), gathers.end(), i,
                             [](std::int64_t v, const Gather& x) { return v < x.first; }) -
            1);
      std::memcpy(target(c, static_cast<std::size_t>(1 + i - c.first)), target(c, 0), c.want);
    });
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
  static std::size_t index_of(std::int64_t replica) { return static_cast<std::size_t>(replica); }
  static std::byte* as_bytes(float* p) { return reinterpret_cast<std::byte*>(p); }
  [[nodiscard]] bool hosts(std::int64_t replica) const { return hosted_.hosts(replica); }

  // The terms of the members elsewhere for a group's sums here (sums[first] on): a row of
  // `row` floats of the receive area per member, its terms for every sum side by side.
  void receive_terms(const std::vector<std::int64_t>& members, std::vector<Sum>& sums,
                     std::size_t first, std::size_t row, Messages& incoming) const {
    for (std::size_t s = first; s < sums.size(); ++s) sums[s].stride = row;
    if (row == 0) return;
    std::size_t at = 0;
    for (const auto x : members) {
      if (hosts(x)) continue;  // summed in place
      for (std::size_t s = first; s < sums.size(); ++s)
        if (sums[s].n > 0)
          incoming.add({x, sums[s].owner, nullptr, sums[s].slot + at,
                        static_cast<std::size_t>(sums[s].n) * sizeof(float)});
      at += row;
    }
    incoming.area += at;
  }

  // The positions of the members elsewhere that own a non-empty piece (`bytes`): what a
  // member here sends (a pass over every member for each member here was R x R steps in
  // one process, where none is elsewhere).
  std::vector<std::size_t> owned_elsewhere(const std::vector<std::int64_t>& members,
                                           const std::vector<std::size_t>& bytes) const {
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < members.size(); ++k)
      if (bytes[k] > 0 && !hosts(members[k])) out.push_back(k);
    return out;
  }

  // The group's first member on each other process, in process order.
  std::vector<std::int64_t> firsts_elsewhere(const std::vector<std::int64_t>& members) const {
    std::map<int, std::int64_t> first;
    for (const auto m : members)
      if (!hosts(m)) first.try_emplace(transport_->process_of(m), m);
    std::vector<std::int64_t> out;
    for (const auto& [process, m] : first) out.push_back(m);
    return out;
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

  void sum_pieces(const std::vector<Sum>& sums, ReduceOp op) {
    run_sums(
        sums, op, hosted_, area_.data(),
        [this](std::int64_t n, const std::function<void(std::int64_t)>& fn) { parallel(n, fn); });
  }

  void parallel(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
    if (pool_ != nullptr && pool_->size() > 1 && n > 1) {
      pool_->run(n, fn);
    } else {
      for (std::int64_t i = 0; i < n; ++i) fn(i);
    }
  }

  // The members of a group hosted here, in replica order.
  std::vector<std::int64_t> hosted_members(const std::vector<std::int64_t>& members) const {
    std::vector<std::int64_t> out;
    for (const auto m : members)
      if (hosts(m)) out.push_back(m);
    return out;
  }

  // The bytes of a group's transfers, counted at the ends hosted here without a pass over
  // its pairs (R x R of them): `bytes[k]` goes from every other member to member k
  // (kToEach: to the owners of the sums) or from member k to every other (kFromEach: sums
  // and shards out). A transfer within one replica counts nothing.
  enum class Way { kToEach, kFromEach };
  void moved(Way way, const std::vector<std::int64_t>& members,
             const std::vector<std::size_t>& bytes) {
    std::uint64_t all = 0, here = 0, n_here = 0;  // bytes of every member, of those hosted here
    for (std::size_t k = 0; k < members.size(); ++k) {
      all += bytes[k];
      if (hosts(members[k])) {
        ++n_here;
        here += bytes[k];
      }
    }
    const std::uint64_t size = members.size();
    const bool to_each = way == Way::kToEach;
    auto& own = to_each ? received_ : sent_;  // member k's own bytes, to or from every other
    auto& own_cross = to_each ? cross_received_ : cross_sent_;
    auto& others = to_each ? sent_ : received_;  // the other members' bytes
    auto& others_cross = to_each ? cross_sent_ : cross_received_;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::size_t r = index_of(members[k]);
      if (!hosts(members[k])) continue;
      own[r] += bytes[k] * (size - 1);
      own_cross[r] += bytes[k] * (size - n_here);
      others[r] += all - bytes[k];
      others_cross[r] += all - here;
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
  Messages lists_[2];        // a call's messages: to the owners, and back
  std::vector<std::uint64_t> sent_, received_, cross_sent_, cross_received_;
};

}  // namespace

std::unique_ptr<Collectives> make_direct_collectives(std::int64_t replication_factor,
                                                     std::unique_ptr<Transport> transport,
                                                     ThreadPool* pool) {
  return std::make_unique<DirectCollectives>(replication_factor, std::move(transport), pool);
}

}  // namespace popkit::engine
