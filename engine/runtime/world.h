// The processes of a run: one alone, or the ranks `mpirun -np N` started (OpenMPI).
// Rank k hosts the replicas [k R / N, (k + 1) R / N): each rank runs its own replicas on
// its own threads and never reads another rank's memory; collectives between replicas
// go through the World's Collectives, and everything else a rank needs from the others
// (losses, measurements, a variable's shards for a checkpoint) through all_gather.
//
//   engine::WorldSession session(argc, argv);  // MPI_Init under mpirun, nothing otherwise
//   engine::World& world = engine::process_world();
//   if (world.rank() == 0) write_run_file(...);
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/runtime/collectives.h"

namespace popkit::engine {

class ThreadPool;

class World {
 public:
  virtual ~World() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  // Ranks on this rank's host (the threads of one host are shared among them).
  [[nodiscard]] virtual int local_size() const = 0;
  // Every rank's bytes, in rank order, on every rank. Every rank must call it.
  [[nodiscard]] virtual std::vector<std::vector<std::byte>> all_gather(
      std::span<const std::byte> mine) = 0;
  // True on every rank when `mine` is true on any: one small reduction, cheap enough to
  // ask before each collective of a step (exec/state.h agree_on_stop). Every rank must
  // call it.
  [[nodiscard]] virtual bool any(bool mine) = 0;
  // Ends every rank at once with `code` (MPI_Abort): for a failure in the middle of a
  // step, when the other ranks may be waiting in a collective for this one.
  [[noreturn]] virtual void abort(int code) = 0;
  // The collectives among the replicas of a run of `replication_factor`, this rank's
  // share of them hosted here.
  [[nodiscard]] virtual std::unique_ptr<Collectives> make_collectives(
      std::int64_t replication_factor, ThreadPool* pool) = 0;
  // The communication library between the ranks ("Open MPI v4.1.4"); empty in one process.
  [[nodiscard]] virtual std::string library() const = 0;
};

// The replicas rank `rank` of `n_ranks` hosts. Throws popkit::Error when the ranks do
// not divide the replication factor.
struct HostedReplicas {
  std::int64_t first = 0;
  std::int64_t n = 0;
  [[nodiscard]] bool hosts(std::int64_t replica) const {
    return replica >= first && replica < first + n;
  }
};
HostedReplicas hosted_replicas(std::int64_t replication_factor, int rank, int n_ranks);
// The rank hosting `replica`.
inline int rank_of_replica(std::int64_t replica, std::int64_t replication_factor, int n_ranks) {
  return static_cast<int>(replica / (replication_factor / n_ranks));
}

// The world of this process: the MPI world inside a WorldSession started under mpirun,
// else a single process.
World& process_world();
std::shared_ptr<World> process_world_shared();

// Whether MPI is built in (POPKIT_MPI), and its library's version when it is.
[[nodiscard]] std::string mpi_build_info();
[[nodiscard]] bool mpi_built_in();
// Whether mpirun started this process: its environment says so (OMPI_COMM_WORLD_SIZE,
// PMIX_RANK, PMI_SIZE), in any build.
[[nodiscard]] bool launched_by_mpirun();

// Starts MPI when the process was launched by mpirun (its environment says so) and
// makes it process_world(); finalizes it at the end of the scope. Without mpirun, or in
// a build without MPI, process_world() stays a single process.
class WorldSession {
 public:
  WorldSession(int& argc, char**& argv);
  ~WorldSession();
  WorldSession(const WorldSession&) = delete;
  WorldSession& operator=(const WorldSession&) = delete;
};

// ---- helpers over all_gather --------------------------------------------------------

// Every rank's values, concatenated in rank order.
template <typename T>
std::vector<T> all_gather_values(World& world, std::span<const T> mine) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto parts = world.all_gather(std::as_bytes(mine));
  std::vector<T> out;
  for (const auto& p : parts) {
    const std::size_t n = p.size() / sizeof(T);
    const std::size_t at = out.size();
    out.resize(at + n);
    if (n > 0) std::memcpy(out.data() + at, p.data(), n * sizeof(T));
  }
  return out;
}

// True on every rank when `mine` is true on any.
bool any_rank(World& world, bool mine);

// The lowest rank whose `message` is not empty, and that message; {-1, ""} when every
// rank's is empty.
struct RankMessage {
  int rank = -1;
  std::string message;
};
RankMessage first_failure(World& world, const std::string& message);

}  // namespace popkit::engine
