// The OpenMPI world: the ranks of `mpirun`, their all_gather, and the transport of the
// direct collectives (transport.h) between replicas on different ranks: nonblocking
// point-to-point messages. Messages from other ranks land in the algorithms' receive
// area of host memory (the network's buffers, not a replica's device memory, so the
// memory account is unchanged).
//
// Threads (mpi_world.h): only the thread that started MPI calls it, MPI_THREAD_FUNNELED.
#include "engine/runtime/mpi_world.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/runtime/transport.h"
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

// The thread level popkit needs: a rank runs its replicas, and the IO thread, on threads
// of its own, and only the thread that started MPI calls it.
constexpr int kThreadLevel = MPI_THREAD_FUNNELED;

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown thread level";
  }
}

// MPI_THREAD_FUNNELED: a call of MPI from another thread than the one that started it
// is a bug of popkit's; it is refused before it reaches MPI.
void on_thread_main(const char* what) {
  int main = 0;
  check(MPI_Is_thread_main(&main), "MPI_Is_thread_main");
  if (!main)
    throw Error(
        "MPI: {} on a thread other than the one that started MPI ({} lets only that "
        "thread call MPI)",
        what, thread_level_name(kThreadLevel));
}

// The messages between ranks, for the direct algorithms (transport.h). Rank k hosts the
// replicas world.h gives it. What send() and receive() record between this rank and
// another in one round goes as one MPI message, each piece read or written in place
// through an MPI datatype of their addresses (no copy): at R 512 over 2 ranks a
// reduce-scatter has 131,072 pieces on each rank, which as messages of their own took
// about 10 s to post and complete. Both ends order a message's pieces by their replicas
// (from, to), so they agree on its layout, and pieces side by side in memory are one
// block of the datatype (a member's slices for the owners of another rank, say); a
// message holds less than 2^31 bytes.
class MpiTransport final : public Transport {
 public:
  MpiTransport(std::int64_t factor, int rank, int n_ranks)
      : factor_(factor), n_ranks_(n_ranks), hosted_(hosted_replicas(factor, rank, n_ranks)) {}

  [[nodiscard]] HostedReplicas hosted() const override { return hosted_; }
  [[nodiscard]] int process_of(std::int64_t replica) const override {
    return rank_of_replica(replica, factor_, n_ranks_);
  }

  void send(const std::byte* data, std::size_t bytes, std::int64_t from, std::int64_t to,
            Round round) override {
    // The datatype only reads a piece it sends.
    pending_[{process_of(to), round, true}].push_back(
        {from, to, const_cast<std::byte*>(data), bytes});
  }
  void receive(std::byte* data, std::size_t bytes, std::int64_t from, std::int64_t to,
               Round round) override {
    pending_[{process_of(from), round, false}].push_back({from, to, data, bytes});
  }
  void flush() override {
    // Nothing to post within one rank (a pipelined plan's stages call from their threads).
    if (std::all_of(pending_.begin(), pending_.end(),
                    [](const auto& kv) { return kv.second.empty(); }))
      return;
    on_thread_main("a collective's messages");
    for (auto& [key, pieces] : pending_) {
      if (pieces.empty()) continue;
      // Both ends order by (from, to), the order the algorithms post in within a group,
      // so that a sort is seldom needed (at R 4096 over 2 ranks it was a quarter of a
      // step).
      const auto order = [](const Piece& a, const Piece& b) {
        return std::pair(a.from, a.to) < std::pair(b.from, b.to);
      };
      if (!std::is_sorted(pieces.begin(), pieces.end(), order))
        std::sort(pieces.begin(), pieces.end(), order);
      for (std::size_t i = 0; i < pieces.size();) i = post(key, pieces, i);
    }
    // Emptied, not freed: the next collective lists as many pieces.
    for (auto& [key, pieces] : pending_) pieces.clear();
  }
  void wait() override {
    flush();
    if (requests_.empty()) return;
    check(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
    requests_.clear();
  }

 private:
  struct Piece {
    std::int64_t from = 0, to = 0;
    std::byte* data = nullptr;
    std::size_t bytes = 0;
  };
  // The other rank, the round, and whether this rank sends.
  struct Key {
    int peer = 0;
    Round round = Round::kToOwner;
    bool sending = false;
    auto operator<=>(const Key&) const = default;
  };

  // Posts pieces [first, last) as one message, as many as fit under 2^31 bytes; returns
  // `last`. Both ends cut alike: they hold the same pieces in the same order.
  std::size_t post(const Key& key, const std::vector<Piece>& pieces, std::size_t first) {
    constexpr std::size_t kMost = std::numeric_limits<int>::max();
    std::size_t last = first, total = 0;
    while (last < pieces.size() && total + pieces[last].bytes <= kMost)
      total += pieces[last++].bytes;
    if (last == first) as_count(pieces[first].bytes, "a message");  // throws: one is too big
    // One piece is a plain message of bytes; more, a datatype of their addresses.
    if (last - first == 1) {
      start(key, pieces[first].data, static_cast<int>(pieces[first].bytes), MPI_BYTE);
      return last;
    }
    lengths_.clear();
    addresses_.clear();
    for (std::size_t i = first; i < last; ++i) {
      MPI_Aint at = 0;
      check(MPI_Get_address(pieces[i].data, &at), "MPI_Get_address");
      // A piece that starts where the last ends extends its block (the message's bytes,
      // and so a block's, are under 2^31).
      if (!lengths_.empty() && addresses_.back() + lengths_.back() == at) {
        lengths_.back() += static_cast<int>(pieces[i].bytes);
        continue;
      }
      lengths_.push_back(static_cast<int>(pieces[i].bytes));
      addresses_.push_back(at);
    }
    MPI_Datatype layout = MPI_DATATYPE_NULL;
    check(MPI_Type_create_hindexed(static_cast<int>(lengths_.size()), lengths_.data(),
                                   addresses_.data(), MPI_BYTE, &layout),
          "MPI_Type_create_hindexed");
    check(MPI_Type_commit(&layout), "MPI_Type_commit");
    // A datatype freed while a message uses it lives until the message completes.
    struct Free {
      MPI_Datatype& type;
      ~Free() { MPI_Type_free(&type); }
    } release{layout};
    start(key, MPI_BOTTOM, 1, layout);
    return last;
  }

  // Posts the send or receive of `count` of `type` at `data` to or from the key's rank.
  // MPI keeps the order of messages with one tag between two ranks, and a round's
  // messages are the only ones between them in flight: the round is the tag.
  void start(const Key& key, void* data, int count, MPI_Datatype type) {
    const int tag = static_cast<int>(key.round);
    requests_.emplace_back();
    check(key.sending
              ? MPI_Isend(data, count, type, key.peer, tag, MPI_COMM_WORLD, &requests_.back())
              : MPI_Irecv(data, count, type, key.peer, tag, MPI_COMM_WORLD, &requests_.back()),
          key.sending ? "MPI_Isend" : "MPI_Irecv");
  }

  std::int64_t factor_;
  int n_ranks_;
  HostedReplicas hosted_;
  std::map<Key, std::vector<Piece>> pending_;
  std::vector<int> lengths_;
  std::vector<MPI_Aint> addresses_;
  std::vector<MPI_Request> requests_;
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
    on_thread_main("an all_gather of the ranks");
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

  bool any(bool mine) override {
    on_thread_main("an agreement of the ranks");
    int flag = mine ? 1 : 0, found = 0;
    check(MPI_Allreduce(&flag, &found, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD), "MPI_Allreduce");
    return found != 0;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  std::unique_ptr<Collectives> make_collectives(std::int64_t replication_factor,
                                                ThreadPool* pool) override {
    return make_direct_collectives(
        replication_factor, std::make_unique<MpiTransport>(replication_factor, rank_, size_), pool);
  }

  std::string library() const override { return library_version(); }

 private:
  int rank_ = 0, size_ = 1, local_size_ = 1;
};

}  // namespace

std::shared_ptr<World> start(int& argc, char**& argv) {
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, kThreadLevel, &provided), "MPI_Init_thread");
  g_started = true;
  // Errors come back as codes, and check() turns them into popkit::Error.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // The levels are ordered: SINGLE < FUNNELED < SERIALIZED < MULTIPLE. Every rank runs
  // the same library, so every rank refuses alike.
  if (provided < kThreadLevel) {
    const std::string library = library_version();
    MPI_Finalize();
    throw Error(
        "MPI: {} provides the thread level {}, but poprun needs {}: a rank runs its replicas "
        "and its IO on threads of its own, while one thread calls MPI",
        library, thread_level_name(provided), thread_level_name(kThreadLevel));
  }
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
