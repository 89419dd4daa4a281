// The in-process backend: every replica lives in this process, so the direct algorithms
// (direct_collectives.cpp) copy between replicas' buffers, or read them in place, and
// never post a message.
#include "engine/runtime/collectives.h"

#include "base/error.h"
#include "engine/runtime/transport.h"

namespace popkit::engine {
namespace {

class InProcess final : public Transport {
 public:
  explicit InProcess(std::int64_t factor) : factor_(factor) {}
  [[nodiscard]] HostedReplicas hosted() const override { return {0, factor_}; }
  [[nodiscard]] int process_of(std::int64_t) const override { return 0; }
  // Every replica is hosted here: the algorithms have nothing to post.
  void send(const std::byte*, std::size_t, std::int64_t, std::int64_t, Round) override {
    POPKIT_ASSERT(false);
  }
  void receive(std::byte*, std::size_t, std::int64_t, std::int64_t, Round) override {
    POPKIT_ASSERT(false);
  }
  void wait() override {}

 private:
  std::int64_t factor_;
};

}  // namespace

std::unique_ptr<Collectives> make_in_process_collectives(std::int64_t replication_factor,
                                                         ThreadPool* pool) {
  return make_direct_collectives(replication_factor,
                                 std::make_unique<InProcess>(replication_factor), pool);
}

}  // namespace popkit::engine
