// Set-up failures agreed between ranks, and the settings every rank must share. See
// agreement.h.
#include "runner/agreement.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <span>

namespace popkit::runner {
namespace {

constexpr int kExitInvalid = 2;

// A failure travels to the other ranks as its exit code (one byte) and its message.
std::string encoded(const std::string& failure, int exit_code) {
  return failure.empty() ? std::string() : static_cast<char>(exit_code) + failure;
}

}  // namespace

void SetupAgreement::reached() {
  done_ = true;
  agree("", false, 1);
}

void SetupAgreement::sync() {
  agree("", false, 1);
}

void SetupAgreement::fail(int exit_code) {
  if (done_) throw;
  std::string message = "unknown failure";
  try {
    throw;
  } catch (const AgreedError&) {
    throw;
  } catch (const InputRefused& e) {
    if (world_.size() == 1) throw AgreedError(e.what(), true, kExitInvalid);
    message = e.what();
    exit_code = kExitInvalid;
  } catch (const std::exception& e) {
    message = e.what();
  }
  if (world_.size() == 1) throw;  // one process: the error as it was
  done_ = true;
  agree(message, false, exit_code);
  POPKIT_ASSERT(false);  // agree() throws for a failure
}

void SetupAgreement::agree(const std::string& failure, bool printed_here, int exit_code) {
  const engine::RankMessage first = engine::first_failure(world_, encoded(failure, exit_code));
  if (first.rank < 0) return;
  POPKIT_ASSERT(!first.message.empty());
  const int code = static_cast<unsigned char>(first.message[0]);
  const std::string message = first.message.substr(1);
  const bool mine = first.rank == world_.rank();
  // The lowest failing rank prints, unless it printed already (config diagnostics);
  // when that rank is not 0, say which rank it was.
  const bool print = mine && !printed_here;
  throw AgreedError(world_.size() > 1 ? fmt::format("rank {}: {}", first.rank, message) : message,
                    print, code);
}

void check_ranks_agree(engine::World& world, const std::vector<Setting>& settings,
                       const std::string& what) {
  if (world.size() == 1) return;
  const std::string mine = nlohmann::json(settings).dump();
  const auto all = world.all_gather(std::as_bytes(std::span(mine.data(), mine.size())));
  const auto settings_of = [&](std::size_t rank) {
    const std::string text(reinterpret_cast<const char*>(all[rank].data()), all[rank].size());
    return nlohmann::json::parse(text).get<std::vector<Setting>>();
  };
  const std::vector<Setting> first = settings_of(0);
  for (std::size_t rank = 1; rank < all.size(); ++rank) {
    const std::vector<Setting> other = settings_of(rank);
    for (std::size_t i = 0; i < first.size() && i < other.size(); ++i) {
      if (first[i] == other[i]) continue;
      const auto shown = [](const std::string& v) { return v.empty() ? "not given" : v; };
      throw AgreedError(
          fmt::format("the ranks disagree on {}: {} is {} on rank 0 and {} on rank {}; every "
                      "rank must be started with the same command line",
                      what, first[i].first, shown(first[i].second), shown(other[i].second), rank),
          world.rank() == 0, kExitInvalid);
    }
    POPKIT_ASSERT(first.size() == other.size());
  }
}

nlohmann::json decided_on_rank_0(engine::World& world,
                                 const std::function<nlohmann::json()>& decide) {
  if (world.size() == 1) return decide();
  int code = 0;
  std::string text;
  if (world.rank() == 0) {
    try {
      text = decide().dump();
    } catch (const AgreedError& e) {
      text = e.what();
      code = e.exit_code();
    } catch (const InputRefused& e) {
      text = e.what();
      code = kExitInvalid;
    } catch (const std::exception& e) {
      text = e.what();
      code = 1;
    }
  }
  const std::string mine = static_cast<char>(code) + text;
  const auto parts = world.all_gather(std::as_bytes(std::span(mine.data(), mine.size())));
  POPKIT_ASSERT(!parts.empty() && !parts[0].empty());
  const std::string decided(reinterpret_cast<const char*>(parts[0].data()) + 1,
                            parts[0].size() - 1);
  if (const int failed = static_cast<int>(parts[0][0]); failed != 0)
    throw AgreedError(decided, world.rank() == 0, failed);
  return nlohmann::json::parse(decided);
}

}  // namespace popkit::runner
