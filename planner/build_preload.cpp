// execution.io_schedule: preload (build_parts.h: preload_next_phase_loads).
//
// PopART's Preload IO schedule: the remote weights a phase loads before its compute loop
// are loaded during the phase before instead, so the load can overlap that phase's
// compute. Each moved load gets a tensor of its own (the home's name with ".preload" and
// the parity of the phase that uses it), as the phase before may be using the home's
// tensor itself (fc2 and fc3 share "inner.weight.shard"); the ops of the using phase read
// it under that name up to its free. The moved alloc and load go to the start of the
// phase before, so the memory walk plans them there: the loaded bytes are live one phase
// longer. Same values, same order of arithmetic: the weights are bitwise those of
// on_demand.
#include <fmt/format.h>

#include <algorithm>

#include "planner/build_parts.h"
#include "planner/operands.h"

namespace popkit::planner::build {
namespace {

// Whether `ops` store to the entry: a load moved before that store would read the old
// value (no phase stores weights the next one uses, but the check keeps it so).
bool stores_to(const std::vector<Op>& ops, int buffer, std::int64_t entry) {
  return std::any_of(ops.begin(), ops.end(), [&](const Op& o) {
    return (o.kind == OpKind::kRemoteStore && o.buffer == buffer && o.entry == entry) ||
           stores_to(o.body, buffer, entry);
  });
}

// The label with the whole word `from` (between spaces or the ends) replaced by `to`.
std::string relabel(const std::string& label, const std::string& from, const std::string& to) {
  std::string out;
  std::size_t at = 0;
  while (at <= label.size()) {
    std::size_t end = label.find(' ', at);
    if (end == std::string::npos) end = label.size();
    const std::string word = label.substr(at, end - at);
    out += word == from ? to : word;
    if (end < label.size()) out += ' ';
    at = end + 1;
  }
  return out;
}

// Replaces `from` by `to` in the op's operands (and its body's) until the free of `from`,
// which is renamed too and sets `freed`.
void rename_until_free(const BuildState& b, Op& o, int from, int to, bool& freed) {
  if (freed) return;
  bool renamed = false;
  for (auto* list : {&o.inputs, &o.outputs, &o.state})
    for (int& t : *list)
      if (t == from) t = to, renamed = true;
  if (renamed) o.label = relabel(o.label, b.tname(from), b.tname(to));
  for (Op& inner : o.body) rename_until_free(b, inner, from, to, freed);
  if (o.kind == OpKind::kFree && renamed) freed = true;
}

}  // namespace

void preload_next_phase_loads(BuildState& b) {
  Plan& plan = b.p;
  for (std::size_t p = 1; p < plan.phases.size(); ++p) {
    std::vector<Op>& ops = plan.phases[p].ops;
    // The allocs go first, then the loads: the engine may hand the loads to its IO
    // thread as one piece, whose tensors must all be allocated by then.
    std::vector<Op> moved_allocs, moved;
    std::vector<std::pair<int, int>> renamed;  // (home tensor, preload tensor)
    std::vector<Op> kept;
    kept.reserve(ops.size());
    bool before_loop = true;
    for (const Op& o : ops) {
      if (o.kind == OpKind::kRepeat) before_loop = false;
      const bool weight_load =
          before_loop && o.kind == OpKind::kRemoteLoad && o.entry >= 0 &&
          plan.buffers[static_cast<std::size_t>(o.buffer)].cls == TensorClass::kWeights &&
          !kept.empty() && kept.back().kind == OpKind::kAlloc &&
          the_tensor(kept.back()) == the_tensor(o) &&
          !stores_to(plan.phases[p - 1].ops, o.buffer, o.entry);
      if (!weight_load) {
        kept.push_back(o);
        continue;
      }
      const int home = the_tensor(o);
      const DeviceTensor d =
          plan.tensors[static_cast<std::size_t>(home)];  // tensor() may grow them
      const int next =
          b.tensor(fmt::format("{}.preload{}", d.name, p % 2), d.cls, d.dtype, d.shape);
      kept.pop_back();  // the alloc moves with the load
      b.alloc(moved_allocs, next);
      moved_allocs.back().preload = true;
      b.remote_load(moved, o.buffer, -1, o.entry, next);
      moved.back().preload = true;
      renamed.emplace_back(home, next);
    }
    if (moved.empty()) continue;
    moved.insert(moved.begin(), std::make_move_iterator(moved_allocs.begin()),
                 std::make_move_iterator(moved_allocs.end()));
    for (const auto& [home, next] : renamed) {
      bool freed = false;
      for (auto& o : kept) rename_until_free(b, o, home, next, freed);
    }
    ops = std::move(kept);
    std::vector<Op>& before = plan.phases[p - 1].ops;
    before.insert(before.begin(), std::make_move_iterator(moved.begin()),
                  std::make_move_iterator(moved.end()));
  }
}

}  // namespace popkit::planner::build
