// What the builder's parts share (build_state.h): the naming scope, tensors and ops.
#include "planner/build_state.h"

#include <fmt/format.h>

#include <unordered_set>

#include "planner/names.h"

namespace popkit::planner::build {

void BuildState::begin_scope(const std::vector<Item>& items) {
  graph_count_.clear();
  // Sized by the program, not the model: a phased plan has 2n phases of one or two items
  // (a standard-mode phase holds all 2n).
  std::unordered_set<int> seen;  // layers
  for (const Item& it : items)
    if (seen.insert(it.layer).second) ++graph_count_[layer(it.layer).graph];
}

std::string BuildState::prefix(int k) const {
  const int g = layer(k).graph;
  const auto it = graph_count_.find(g);
  return it != graph_count_.end() && it->second > 1 ? layer(k).name
                                                    : graph_names[static_cast<std::size_t>(g)];
}

int BuildState::tensor(const std::string& name, TensorClass cls, DType dtype, const Shape& shape,
                       bool always_live) {
  std::string key = name;
  // A pipelined plan's stages are devices of their own: a name is per stage.
  const std::string stage_key = stage >= 0 ? fmt::format("@{}", stage) : std::string();
  for (int copy = 2;; ++copy) {
    const auto it = tensor_of_.find(key + stage_key);
    if (it == tensor_of_.end()) break;
    const DeviceTensor& t = p.tensors[static_cast<std::size_t>(it->second)];
    if (t.cls == cls && t.dtype == dtype && t.shape == shape && t.always_live == always_live)
      return it->second;
    key = fmt::format("{}#{}", name, copy);  // same name, different tensor: keep both
  }
  DeviceTensor t;
  t.stage = stage;
  t.name = key;
  t.cls = cls;
  t.dtype = dtype;
  t.shape = shape;
  t.nelms = 1;
  for (const std::int64_t d : shape) t.nelms *= d;
  t.nbytes = static_cast<std::uint64_t>(t.nelms) * static_cast<std::uint64_t>(dtype_size(dtype));
  t.always_live = always_live;
  p.tensors.push_back(t);
  const int index = static_cast<int>(p.tensors.size()) - 1;
  tensor_of_.emplace(key + stage_key, index);
  return index;
}

Op BuildState::op(OpKind kind, std::string label) {
  Op o;
  o.kind = kind;
  o.label = std::move(label);
  return o;
}

void BuildState::set_tensor(Op& o, int t) {
  switch (o.kind) {
    case OpKind::kFree:
    case OpKind::kRemoteStore:
    case OpKind::kHostStore:
      o.inputs = {t};
      break;
    case OpKind::kAllReduce:
      o.state = {t};
      break;
    default:
      o.outputs = {t};
      break;
  }
}

void BuildState::tensor_op(std::vector<Op>& ops, OpKind kind, int t) {
  Op o = op(kind, tname(t));
  set_tensor(o, t);
  ops.push_back(std::move(o));
}

void BuildState::remote_load(std::vector<Op>& ops, int buffer, std::int64_t row, std::int64_t entry,
                             int t) {
  const RemoteBuffer& b = p.buffers[static_cast<std::size_t>(buffer)];
  Op o =
      op(OpKind::kRemoteLoad, entry >= 0 ? fmt::format("{}[{}] -> {}", b.name, entry, tname(t))
                                         : fmt::format("{} row {} -> {}", b.name, row, tname(t)));
  set_tensor(o, t);
  o.buffer = buffer;
  o.row = row;
  o.entry = entry;
  ops.push_back(std::move(o));
}

void BuildState::remote_store(std::vector<Op>& ops, int buffer, std::int64_t row,
                              std::int64_t entry, int t) {
  const RemoteBuffer& b = p.buffers[static_cast<std::size_t>(buffer)];
  Op o =
      op(OpKind::kRemoteStore, entry >= 0 ? fmt::format("{} -> {}[{}]", tname(t), b.name, entry)
                                          : fmt::format("{} -> {} row {}", tname(t), b.name, row));
  set_tensor(o, t);
  o.buffer = buffer;
  o.row = row;
  o.entry = entry;
  ops.push_back(std::move(o));
}

void BuildState::host_load(std::vector<Op>& ops, Stream s, int t) {
  Op o = op(OpKind::kHostLoad, fmt::format("{} -> {}", enum_name(s), tname(t)));
  o.stream = s;
  set_tensor(o, t);
  ops.push_back(std::move(o));
}

void BuildState::host_store(std::vector<Op>& ops, Stream s, int t) {
  Op o = op(OpKind::kHostStore, fmt::format("{} -> host", enum_name(s)));
  o.stream = s;
  set_tensor(o, t);
  ops.push_back(std::move(o));
}

void BuildState::shard_op(std::vector<Op>& ops, OpKind kind, int src, int dst) {
  Op o = op(kind, fmt::format("{} -> {}", tname(src), tname(dst)));
  o.inputs = {src};
  o.outputs = {dst};
  o.grouping = p.sharding_grouping;
  ops.push_back(std::move(o));
}

void BuildState::all_gather(std::vector<Op>& ops, int src, int dst) {
  shard_op(ops, OpKind::kAllGather, src, dst);
}

void BuildState::slice_shard(std::vector<Op>& ops, int src, int dst) {
  shard_op(ops, OpKind::kSliceShard, src, dst);
}

void BuildState::transfer(std::vector<Op>& ops, OpKind kind, int src, int dst, int peer) {
  // A receive in place (src == dst) waits for the send and copies nothing.
  const std::string what =
      src == dst ? tname(dst) : fmt::format("{} -> {}", tname(src), tname(dst));
  Op o =
      op(kind, fmt::format("{} ({} stage {})", what, kind == OpKind::kSend ? "to" : "from", peer));
  o.inputs = {src};
  o.outputs = {dst};
  o.peer = peer;
  ops.push_back(std::move(o));
}

void BuildState::add(std::vector<Op>& ops, int sum, int addend) {
  Op o = op(OpKind::kAdd, fmt::format("{} += {}", tname(sum), tname(addend)));
  o.inputs = {addend};
  o.state = {sum};
  ops.push_back(std::move(o));
}

void BuildState::move_ops(std::vector<Op>& from, std::vector<Op>& to) {
  if (to.empty()) to.reserve(from.size());
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  from.clear();
}

}  // namespace popkit::planner::build
