// Which phases a standard or phased plan runs, and their names (build_parts.h:
// plan_phases): the explicit phases of the config, or the automatic ones of the PopXL
// MNIST examples.
#include <unordered_map>

#include "base/error.h"
#include "planner/build_parts.h"

namespace popkit::planner::build {
namespace {

using config::Pass;

std::string phase_name(const BuildState& b, const std::vector<Item>& items) {
  std::string name;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (it.backward && i > 0 && items[i - 1].layer == it.layer && !items[i - 1].backward)
      continue;  // merged into the forward below
    if (!name.empty()) name += ", ";
    const bool both = !it.backward && i + 1 < items.size() && items[i + 1].layer == it.layer &&
                      items[i + 1].backward;
    const std::string& lname = b.layer(it.layer).name;
    if (both)
      name += lname + (it.layer == b.n - 1 ? " forward+loss+backward+optimizer"
                                           : " forward+backward+optimizer");
    else
      name += lname + (it.backward ? " backward+optimizer" : " forward");
  }
  return name;
}

// Evaluation: standard mode, one phase of every forward; phased, a phase per layer with
// parameters with the layers without before it (the identity in evaluation, they compute
// nothing), so each phase loads one layer's weights from their home.
Schedule eval_phases(const BuildState& b) {
  Schedule s;
  if (b.c.execution.mode == ExecutionMode::kStandard) {
    std::vector<Item> all;
    for (int k = 0; k < b.n; ++k) all.push_back({k, false});
    s.phases.push_back(all);
    s.names.push_back("forward");
    return s;
  }
  std::vector<Item> items;
  for (int k = 0; k < b.n; ++k) {
    items.push_back({k, false});
    if (!b.has_params(k)) continue;  // validation: the last layer gives the logits
    s.phases.push_back(items);
    s.names.push_back(phase_name(b, items));
    items.clear();
  }
  return s;
}

// The rules validation guarantees, checked again because the engine relies on them.
void check_phases(const BuildState& b, const std::vector<std::vector<Item>>& phases) {
  const int n = b.n;
  std::vector<Item> flat;
  for (const auto& items : phases) flat.insert(flat.end(), items.begin(), items.end());
  bool ok = static_cast<int>(flat.size()) == 2 * n;
  for (int k = 0; ok && k < n; ++k) {
    ok = flat[static_cast<std::size_t>(k)].layer == k &&
         !flat[static_cast<std::size_t>(k)].backward &&
         flat[static_cast<std::size_t>(n + k)].layer == n - 1 - k &&
         flat[static_cast<std::size_t>(n + k)].backward;
  }
  if (ok) {
    // The last forward and the last layer's backward share a phase.
    std::size_t pos = 0;
    for (const auto& items : phases) {
      const std::size_t end = pos + items.size();
      const auto last_fwd = static_cast<std::size_t>(n - 1);
      if (last_fwd >= pos && last_fwd < end) ok = last_fwd + 1 < end;
      pos = end;
    }
  }
  if (!ok)
    throw Error(
        "execution.phases: every layer's forward and backward must appear once, forwards "
        "in layer order, then backwards in reverse order, the last layer's backward right "
        "after its forward in the same phase");
}

}  // namespace

Schedule plan_phases(const BuildState& b) {
  if (b.eval) return eval_phases(b);
  const config::Config& c = b.c;
  const int n = b.n;
  Schedule s;
  if (c.execution.mode == ExecutionMode::kStandard) {
    std::vector<Item> all;
    for (int k = 0; k < n; ++k) all.push_back({k, false});
    for (int k = n - 1; k >= 0; --k) all.push_back({k, true});
    s.phases.push_back(all);
    s.names.push_back(c.remote.optimizer_state ? "forward+loss+backward"
                                               : "forward+loss+backward+optimizer");
    return s;
  }
  if (c.execution.phases_auto) {
    // The phased-execution MNIST example: a forward phase per layer but the last; the
    // last layer's forward, loss, backward and optimizer; then a backward + optimizer
    // phase per layer in reverse.
    for (int k = 0; k + 1 < n; ++k) s.phases.push_back({{k, false}});
    s.phases.push_back({{n - 1, false}, {n - 1, true}});
    for (int k = n - 2; k >= 0; --k) s.phases.push_back({{k, true}});
  } else {
    std::unordered_map<std::string, int> index;
    for (int k = 0; k < n; ++k) index.emplace(b.layer(k).name, k);
    for (std::size_t p = 0; p < c.execution.phases.size(); ++p) {
      std::vector<Item> items;
      for (const auto& it : c.execution.phases[p]) {
        const auto found = index.find(it.layer);
        if (found == index.end())
          throw Error("execution.phases[{}]: unknown layer '{}'", p, it.layer);
        items.push_back({found->second, it.pass == Pass::kBackward});
      }
      s.phases.push_back(items);
    }
    check_phases(b, s.phases);
  }
  for (const auto& items : s.phases) s.names.push_back(phase_name(b, items));
  return s;
}

}  // namespace popkit::planner::build
