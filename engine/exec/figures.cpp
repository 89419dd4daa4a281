// Memory and bytes moved, replica by replica (figures.h).
#include "engine/exec/figures.h"

#include <algorithm>
#include <span>

namespace popkit::engine {

MemoryReport memory_report(const EngineState& m) {
  World& world = *m.world;
  MemoryReport out;
  std::vector<std::uint64_t> peak, live, streaming;
  std::vector<planner::ClassBytes> by_class;
  // Per replica: its device's figures, or with a pipelined plan its largest stage's
  // (each device must hold its own; the plan's peak is the largest stage's too).
  for (std::int64_t r = m.hosted.first; r < m.hosted.first + m.hosted.n; ++r) {
    std::uint64_t most = 0, most_live = 0;
    for (std::int64_t s = 0; s < m.n_stages; ++s) {
      most = std::max(most, m.device(r, s).account.peak());
      most_live = std::max(most_live, m.device(r, s).account.always_live());
    }
    peak.push_back(most);
    live.push_back(most_live);
    const auto& store = m.device(r, 0).store->account();
    streaming.push_back(store.bytes);
    by_class.push_back(store.by_class);
  }
  out.peak_bytes = all_gather_values(world, std::span<const std::uint64_t>(peak));
  out.always_live_bytes = all_gather_values(world, std::span<const std::uint64_t>(live));
  out.streaming_bytes = all_gather_values(world, std::span<const std::uint64_t>(streaming));
  out.streaming_by_class = all_gather_values(world, std::span<const planner::ClassBytes>(by_class));
  for (const auto& phase : m.phase_memory)
    out.phases.push_back(all_gather_values(world, std::span<const planner::PhaseMemory>(phase)));
  return out;
}

std::vector<BytesMoved> bytes_moved(const EngineState& m) {
  std::vector<BytesMoved> mine;
  for (std::int64_t r = m.hosted.first; r < m.hosted.first + m.hosted.n; ++r) {
    BytesMoved b;
    for (std::int64_t s = 0; s < m.n_stages; ++s) {
      const auto& dev = m.device(r, s);
      b.host_in += dev.host_in.load();
      b.host_out += dev.host_out.load();
      b.remote_in += dev.remote_in.load();
      b.remote_out += dev.remote_out.load();
    }
    std::vector<Collectives*> all{m.collectives.get()};
    for (const auto& c : m.stage_collectives) all.push_back(c.get());
    for (Collectives* c : all) {
      b.collective_sent += c->bytes(r).sent;
      b.collective_received += c->bytes(r).received;
      b.cross_process_sent += c->cross_process_bytes(r).sent;
      b.cross_process_received += c->cross_process_bytes(r).received;
    }
    mine.push_back(b);
  }
  return all_gather_values(*m.world, std::span<const BytesMoved>(mine));
}

}  // namespace popkit::engine
