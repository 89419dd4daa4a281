// The direct collectives with their replicas spread over processes (transport.h): here
// two "processes" are two threads, each with its own collectives over a transport that
// carries the messages between them as MPI does (a send buffered at once, a receive
// complete at wait(), messages with one (from, to, round) kept in order). The values and
// bytes must be bitwise those of one process, in a sanitized build too (the tsan preset
// builds without MPI).
#include "engine/runtime/transport.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/runtime/thread_pool.h"

using namespace popkit::engine;
using popkit::planner::ReplicaGrouping;

namespace {

// Boost.Test's assertions are not safe on the threads that stand for processes: a broken
// rule there throws, and the test rethrows it.
void require(bool ok, const char* what) {
  if (!ok) throw std::logic_error(what);
}

// The messages in flight between the processes of a test.
class Postbox {
 public:
  using Key = std::tuple<std::int64_t, std::int64_t, Round>;  // from, to, round
  void put(const Key& key, std::vector<std::byte> letter) {
    {
      const std::lock_guard lock(mu_);
      letters_[key].push_back(std::move(letter));
    }
    arrived_.notify_all();
  }
  std::vector<std::byte> take(const Key& key) {
    std::unique_lock lock(mu_);
    // A message never sent is a failure, not a hang.
    require(
        arrived_.wait_for(lock, std::chrono::seconds(30), [&] { return !letters_[key].empty(); }),
        "a receive waited 30 s for a message never sent");
    std::vector<std::byte> letter = std::move(letters_[key].front());
    letters_[key].pop_front();
    return letter;
  }

 private:
  std::mutex mu_;
  std::condition_variable arrived_;
  std::map<Key, std::deque<std::vector<std::byte>>> letters_;
};

class ThreadTransport final : public Transport {
 public:
  ThreadTransport(Postbox& box, std::int64_t factor, int process, int n_processes)
      : box_(box),
        factor_(factor),
        n_(n_processes),
        hosted_(hosted_replicas(factor, process, n_)) {}
  [[nodiscard]] HostedReplicas hosted() const override { return hosted_; }
  [[nodiscard]] int process_of(std::int64_t replica) const override {
    return rank_of_replica(replica, factor_, n_);
  }
  void send(const std::byte* data, std::size_t bytes, std::int64_t from, std::int64_t to,
            Round round) override {
    require(hosted_.hosts(from) && !hosted_.hosts(to), "a send not from here to elsewhere");
    box_.put({from, to, round}, std::vector<std::byte>(data, data + bytes));
  }
  void receive(std::byte* data, std::size_t bytes, std::int64_t from, std::int64_t to,
               Round round) override {
    require(hosted_.hosts(to) && !hosted_.hosts(from), "a receive not from elsewhere to here");
    pending_.push_back({data, bytes, {from, to, round}});
  }
  void wait() override {
    for (const Pending& p : pending_) {
      const std::vector<std::byte> letter = box_.take(p.key);
      require(letter.size() == p.bytes, "a message of another size than its receipt");
      std::memcpy(p.data, letter.data(), p.bytes);
    }
    pending_.clear();
  }

 private:
  struct Pending {
    std::byte* data;
    std::size_t bytes;
    Postbox::Key key;
  };
  Postbox& box_;
  std::int64_t factor_;
  int n_;
  HostedReplicas hosted_;
  std::vector<Pending> pending_;
};

// Every replica's tensors: `x` reduced in place, its shards, and the gathered shards;
// `quarter` a shard of a group of four, gathered into `whole`.
struct Tensors {
  std::vector<std::vector<float>> x, shard, full, quarter, whole;
};

std::vector<ReplicaBuffer> buffers(std::vector<std::vector<float>>& v, HostedReplicas hosted) {
  std::vector<ReplicaBuffer> out;
  for (std::int64_t r = hosted.first; r < hosted.first + hosted.n; ++r) {
    auto& f = v[static_cast<std::size_t>(r)];
    out.push_back({r, reinterpret_cast<std::byte*>(f.data()), static_cast<std::int64_t>(f.size()),
                   DType::kFloat32});
  }
  return out;
}

// The collectives a sharded step runs, with groups within and across processes.
void run_step(Collectives& c, Tensors& t, HostedReplicas hosted, std::int64_t factor) {
  const ReplicaGrouping all{factor, factor, 1}, pairs{factor, 2, 2};  // pairs: {0,2} {1,3}
  c.all_reduce(all, ReduceOp::kMean, buffers(t.x, hosted));
  c.all_reduce(pairs, ReduceOp::kSum, buffers(t.x, hosted));
  c.reduce_scatter(all, pairs, ReduceOp::kSum, buffers(t.x, hosted), buffers(t.shard, hosted));
  c.all_gather(pairs, buffers(t.shard, hosted), buffers(t.full, hosted));
  // Two members of each process take every shard of the other's: it crosses once.
  c.reduce_scatter(all, all, ReduceOp::kSum, buffers(t.x, hosted), buffers(t.quarter, hosted));
  c.all_gather(all, buffers(t.quarter, hosted), buffers(t.whole, hosted));
}

// Every replica's tensor the same bits in both (float == would take -0 for +0).
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(collectives)

BOOST_AUTO_TEST_CASE(replicas_over_two_processes_give_one_process_values_and_bytes) {
  constexpr std::int64_t kR = 4;
  constexpr std::int64_t kN = 2 * 16384 + 7;  // pieces of 64 KiB, chunks that differ
  constexpr std::int64_t kShard = (kN + 1) / 2;
  Tensors start;
  for (std::int64_t r = 0; r < kR; ++r) {
    std::vector<float> x(static_cast<std::size_t>(kN));
    // Sums that round: replica order matters in the last bits.
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(r + 1) * 0.1f + static_cast<float>(i % 97) * 1e-3f;
    start.x.push_back(x);
    start.shard.emplace_back(static_cast<std::size_t>(kShard), -1.0f);
    start.full.emplace_back(static_cast<std::size_t>(kN), -1.0f);
    start.quarter.emplace_back(static_cast<std::size_t>((kN + 3) / 4), -1.0f);
    start.whole.emplace_back(static_cast<std::size_t>(kN), -1.0f);
  }

  Tensors one = start;
  ThreadPool pool(2);
  auto single = make_in_process_collectives(kR, &pool);
  run_step(*single, one, {0, kR}, kR);

  Tensors spread = start;
  Postbox box;
  std::vector<std::unique_ptr<Collectives>> processes;
  for (int p = 0; p < 2; ++p)
    processes.push_back(
        make_direct_collectives(kR, std::make_unique<ThreadTransport>(box, kR, p, 2), nullptr));
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(2);
  for (int p = 0; p < 2; ++p)
    threads.emplace_back([&, p] {
      try {
        run_step(*processes[static_cast<std::size_t>(p)], spread, hosted_replicas(kR, p, 2), kR);
      } catch (...) {
        errors[static_cast<std::size_t>(p)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);

  BOOST_TEST(same_bits(spread.x, one.x));
  BOOST_TEST(same_bits(spread.shard, one.shard));
  BOOST_TEST(same_bits(spread.full, one.full));
  BOOST_TEST(same_bits(spread.quarter, one.quarter));
  BOOST_TEST(same_bits(spread.whole, one.whole));
  // Every member holds the same gathered tensor, every element of it written.
  for (const auto& w : spread.whole) {
    BOOST_TEST((w == spread.whole[0]));
    BOOST_TEST(std::count(w.begin(), w.end(), -1.0f) == 0);
  }
  std::uint64_t cross_sent = 0, cross_received = 0;
  for (std::int64_t r = 0; r < kR; ++r) {
    const Collectives& c = *processes[static_cast<std::size_t>(r / 2)];
    BOOST_TEST(c.bytes(r).sent == single->bytes(r).sent);
    BOOST_TEST(c.bytes(r).received == single->bytes(r).received);
    BOOST_TEST(c.cross_process_bytes(r).sent < c.bytes(r).sent);
    BOOST_TEST(single->cross_process_bytes(r).sent == 0u);
    cross_sent += c.cross_process_bytes(r).sent;
    cross_received += c.cross_process_bytes(r).received;
  }
  // Across the pairs {0,2} {1,3} every byte crosses; within {0,1,2,3} half the members
  // are elsewhere. What one process sends across, the other receives.
  BOOST_TEST(cross_sent > 0u);
  BOOST_TEST(cross_sent == cross_received);
}

BOOST_AUTO_TEST_SUITE_END()
