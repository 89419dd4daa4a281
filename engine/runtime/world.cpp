// The single-process world, the process's world, and the helpers over all_gather. The
// MPI world lives in mpi_world.cpp, built only with POPKIT_MPI.
#include "engine/runtime/world.h"

#include <algorithm>
#include <cstdlib>

#include "base/error.h"
#include "engine/runtime/mpi_world.h"

namespace popkit::engine {
namespace {

class SingleProcess final : public World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_size() const override { return 1; }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override {
    return {std::vector<std::byte>(mine.begin(), mine.end())};
  }
  bool any(bool mine) override { return mine; }
  [[noreturn]] void abort(int code) override { std::exit(code); }
  std::unique_ptr<Collectives> make_collectives(std::int64_t replication_factor,
                                                ThreadPool* pool) override {
    return make_in_process_collectives(replication_factor, pool);
  }
  std::string library() const override { return {}; }
};

std::shared_ptr<World>& world_slot() {
  static std::shared_ptr<World> world = std::make_shared<SingleProcess>();
  return world;
}

}  // namespace

HostedReplicas hosted_replicas(std::int64_t replication_factor, int rank, int n_ranks) {
  if (n_ranks < 1 || rank < 0 || rank >= n_ranks)
    throw Error("rank {} of {} ranks is out of range", rank, n_ranks);
  if (replication_factor % n_ranks != 0)
    throw Error(
        "replication.factor {} cannot be spread over {} ranks: each rank hosts the same number "
        "of replicas, so the ranks must divide the factor (mpirun -np N or --processes N, "
        "N one of its divisors)",
        replication_factor, n_ranks);
  const std::int64_t n = replication_factor / n_ranks;
  return {rank * n, n};
}

World& process_world() {
  return *world_slot();
}

std::shared_ptr<World> process_world_shared() {
  return world_slot();
}

std::string mpi_build_info() {
#ifdef POPKIT_MPI
  return "MPI built in (" + mpi::library_version() + ")";
#else
  return "MPI not built in (configure with libopenmpi-dev installed)";
#endif
}

bool mpi_built_in() {
#ifdef POPKIT_MPI
  return true;
#else
  return false;
#endif
}

bool launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

WorldSession::WorldSession([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {
#ifdef POPKIT_MPI
  if (launched_by_mpirun()) world_slot() = mpi::start(argc, argv);
#endif
}

WorldSession::~WorldSession() {
#ifdef POPKIT_MPI
  if (world_slot()->size() > 1 || mpi::started()) mpi::finish();
#endif
}

bool any_rank(World& world, bool mine) {
  return world.any(mine);
}

RankMessage first_failure(World& world, const std::string& message) {
  const auto parts = world.all_gather(std::as_bytes(std::span(message.data(), message.size())));
  for (std::size_t k = 0; k < parts.size(); ++k)
    if (!parts[k].empty())
      return {static_cast<int>(k),
              std::string(reinterpret_cast<const char*>(parts[k].data()), parts[k].size())};
  return {};
}

}  // namespace popkit::engine
