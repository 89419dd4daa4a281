// Setting up the engine's shared state: the plan checked, the replicas this process
// hosts with their devices, the pool and the collectives; and the helpers the parts
// share to run every replica and report its time and its first failure.
#include "engine/exec/state.h"

#include <numeric>
#include <thread>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "engine/exec/plan_check.h"

namespace popkit::engine {

std::string shape_str(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

OpCategory category(planner::OpKind k) {
  using planner::OpKind;
  switch (k) {
    case OpKind::kAlloc:
    case OpKind::kFree:
      return OpCategory::kMemory;
    case OpKind::kRemoteLoad:
    case OpKind::kRemoteStore:
      return OpCategory::kRemote;
    case OpKind::kHostLoad:
    case OpKind::kHostStore:
      return OpCategory::kHostIo;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllReduce:
    case OpKind::kSliceShard:
      return OpCategory::kCollective;
    case OpKind::kSend:
    case OpKind::kRecv:
      return OpCategory::kPipeline;
    default:
      return OpCategory::kCompute;
  }
}

EngineState::EngineState(planner::Plan p, EngineOptions o)
    : plan(std::move(p)),
      options(std::move(o)),
      n_cores(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
  optimizer.emplace(plan.optimizer);
  check_plan(plan);
  image_size = std::accumulate(plan.input_shape.begin(), plan.input_shape.end(), std::int64_t{1},
                               std::multiplies<>());
  tokens = !plan.layers.empty() && config::layer_kind_rules(plan.layers.front().kind).reads_tokens;
  n_replicas = plan.replication_factor;
  world = options.world ? options.world : process_world_shared();
  hosted = hosted_replicas(n_replicas, world->rank(), world->size());
  n_stages = plan.pipeline ? static_cast<std::int64_t>(plan.pipeline->stages.size()) : 1;
  if (n_stages > 1 && world->size() > 1)
    throw Error(
        "plan '{}' is pipelined: its stage workers run in one process (threads), not over "
        "{} MPI ranks; run it without mpirun",
        plan.name, world->size());
  for (std::int64_t s = 0; s < n_stages && n_stages > 1; ++s)
    stage_block_bytes.push_back(planner::device_block_bytes(plan, static_cast<int>(s)));
  block_bytes = n_stages > 1 ? *std::max_element(stage_block_bytes.begin(), stage_block_bytes.end())
                             : planner::device_block_bytes(plan);
  // The host's cores are shared by the ranks on it.
  const int available = options.n_threads > 0
                            ? options.n_threads
                            : std::max(1, n_cores / std::max(1, world->local_size()));
  const int threads = planner::compute_threads(available, hosted.n, n_stages);
  pool = std::make_unique<ThreadPool>(threads);
  schedule = planner::schedule(plan, {hosted.n, threads, n_cores, options.io_overlap});
  collectives = options.collectives
                    ? options.collectives
                    : std::shared_ptr<Collectives>(world->make_collectives(n_replicas, pool.get()));
  for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r)
    for (std::int64_t s = 0; s < n_stages; ++s) {
      const std::uint64_t bytes =
          n_stages > 1 ? stage_block_bytes[static_cast<std::size_t>(s)] : block_bytes;
      auto dev = std::make_unique<Device>();
      dev->block = AlignedBlock(bytes);
      dev->fit.emplace(bytes);
      dev->tensors.resize(plan.tensors.size(), nullptr);
      dev->store = std::make_unique<RemoteStore>(plan.buffers);
      devices.push_back(std::move(dev));
    }
  for (std::int64_t s = 0; s < n_stages && n_stages > 1; ++s)
    stage_collectives.push_back(world->make_collectives(n_replicas, nullptr));
}

void EngineState::agree_on_stop(bool before_update) {
  if (world->size() == 1 || !options.stop_requested || !gate.open()) return;
  if (any_rank(*world, options.stop_requested())) gate.abandon(steps_done + 1);
  if (before_update) gate.commit();
}

Device& EngineState::replica(std::int64_t r) const {
  POPKIT_ASSERT(hosted.hosts(r) && n_stages == 1);
  return *devices[static_cast<std::size_t>(r - hosted.first)];
}

Device& EngineState::device(std::int64_t r, std::int64_t s) const {
  POPKIT_ASSERT(hosted.hosts(r) && s >= 0 && s < n_stages);
  return *devices[static_cast<std::size_t>((r - hosted.first) * n_stages + s)];
}

void EngineState::add_seconds(OpCategory c, double seconds) {
  timings.category_seconds[static_cast<std::size_t>(c)] += seconds;
  if (current_phase < timings.phase_category_seconds.size())
    timings.phase_category_seconds[current_phase][static_cast<std::size_t>(c)] += seconds;
}

void EngineState::on_every_replica(planner::SegmentRun run,
                                   const std::function<void(std::int64_t)>& task) const {
  if (run != planner::SegmentRun::kPool) {
    for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r) task(r);
  } else {
    pool->run(hosted.n, [&](std::int64_t i) { task(hosted.first + i); });
  }
}

void EngineState::add_slowest_segment_seconds() {
  for (std::size_t c = 0; c < kNumOpCategories; ++c) {
    double slowest = 0.0;
    for (const auto& dev : devices) slowest = std::max(slowest, dev->segment_seconds[c]);
    add_seconds(static_cast<OpCategory>(c), slowest);
  }
}

void EngineState::rethrow_earliest_failure() const {
  const Device* failed = nullptr;
  for (const auto& dev : devices)
    if (dev->error && (failed == nullptr || dev->error_at < failed->error_at)) failed = dev.get();
  if (failed != nullptr) std::rethrow_exception(failed->error);
}

}  // namespace popkit::engine
