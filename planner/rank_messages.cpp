// The collectives' messages between ranks (rank_messages.h).
#include "planner/rank_messages.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "planner/operands.h"
#include "planner/sharding.h"

namespace popkit::planner {
namespace {

std::uint64_t u(std::int64_t v) {
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

class Count {
 public:
  Count(const Plan& plan, std::int64_t ranks)
      : plan_(plan),
        per_rank_(plan.replication_factor / ranks),
        h_(static_cast<std::size_t>(ranks)),
        c_(static_cast<std::size_t>(ranks)),
        pieces_(static_cast<std::size_t>(ranks)),
        area_(static_cast<std::size_t>(ranks)) {}

  void ops(const std::vector<Op>& list) {
    for (const Op& op : list) {
      if (op.kind == OpKind::kRepeat)
        ops(op.body);
      else
        collective(op);
    }
  }

  [[nodiscard]] const RankMessages& result() const { return out_; }

 private:
  const DeviceTensor& tensor(int t) const { return plan_.tensors[static_cast<std::size_t>(t)]; }

  // A piece of each member: non-empty or not, and its floats when they land in the
  // receive area (a sum's term), else 0.
  void collective(const Op& op) {
    std::function<bool(std::int64_t member, std::int64_t position)> non_empty;
    std::uint64_t area_piece = 0;
    bool gather = false;
    switch (op.kind) {
      case OpKind::kAllReduce: {
        const std::int64_t n = tensor(op.state[0]).nelms;
        const std::int64_t g = op.grouping.group_size;
        non_empty = [=](std::int64_t, std::int64_t k) { return owner_chunk(n, g, k).n > 0; };
        area_piece = u(owner_chunk(n, g, 0).n);
        break;
      }
      case OpKind::kReduceScatter: {
        const std::int64_t n = tensor(op.inputs[shard_operand::kSrc]).nelms;
        const std::int64_t n_dst = tensor(op.outputs[shard_operand::kDst]).nelms;
        non_empty = [&op, n, n_dst](std::int64_t m, std::int64_t) {
          return shard_extent(n, n_dst, op.shard_grouping.rank_in_group(m)) > 0;
        };
        area_piece = u(n_dst);
        break;
      }
      case OpKind::kAllGather: {
        const DeviceTensor& src = tensor(op.inputs[shard_operand::kSrc]);
        const std::int64_t shard = src.nelms;
        const std::int64_t want = tensor(op.outputs[shard_operand::kDst]).nelms;
        non_empty = [=](std::int64_t, std::int64_t k) { return shard_extent(want, shard, k) > 0; };
        // A shard lands whole in the receive area, rounded up to floats.
        area_piece = (u(shard) * u(dtype_size(src.dtype)) + sizeof(float) - 1) / sizeof(float);
        gather = true;
        break;
      }
      default:
        return;
    }
    std::fill(pieces_.begin(), pieces_.end(), 0);
    std::fill(area_.begin(), area_.end(), 0);
    const ReplicaGrouping& g = op.grouping;
    std::vector<std::size_t> touched;
    for (std::int64_t group = 0; group < g.n_groups(); ++group) {
      std::uint64_t c = 0;
      for (std::int64_t k = 0; k < g.group_size; ++k) {
        const std::int64_t m = g.member(group, k);
        const auto q = static_cast<std::size_t>(m / per_rank_);
        if (h_[q] == 0 && c_[q] == 0) touched.push_back(q);
        ++h_[q];
        if (non_empty(m, k)) {
          ++c_[q];
          ++c;
        }
      }
      for (const std::size_t q : touched) {
        if (gather) {
          // Each shard elsewhere lands once; each shard here goes once to every other rank.
          pieces_[q] += (c - c_[q]) + c_[q] * (touched.size() - 1);
          area_[q] += (c - c_[q]) * area_piece * sizeof(float);
        } else {
          const std::uint64_t here = c_[q] * (u(g.group_size) - h_[q]);
          pieces_[q] += (c - c_[q]) * h_[q] + here;
          area_[q] += here * area_piece * sizeof(float);
        }
        h_[q] = c_[q] = 0;
      }
      touched.clear();
    }
    out_.pieces = std::max(out_.pieces, *std::max_element(pieces_.begin(), pieces_.end()));
    out_.receive_bytes =
        std::max(out_.receive_bytes, *std::max_element(area_.begin(), area_.end()));
  }

  const Plan& plan_;
  std::int64_t per_rank_;
  std::vector<std::uint64_t> h_, c_, pieces_, area_;
  RankMessages out_;
};

}  // namespace

RankMessages rank_messages(const Plan& plan, std::int64_t ranks) {
  if (ranks <= 1 || plan.replication_factor % ranks != 0) return {};
  Count count(plan, ranks);
  for (const Phase& phase : plan.phases) count.ops(phase.ops);
  return count.result();
}

}  // namespace popkit::planner
