// The variables of a plan and their homes (build_parts.h: add_variables): each parameter
// a layer's kind declares (planner/layer_kinds.h) and the optimizer's state for it, sharded
// under RTS, at home in a remote buffer (one row per layer of the graph) or in an
// always-live device tensor, with the initial value the kind asks for.
#include <fmt/format.h>

#include <unordered_map>

#include "base/error.h"
#include "planner/build_parts.h"
#include "planner/optimizer_kinds.h"
#include "planner/sharding.h"

namespace popkit::planner::build {
namespace {

// What a parameter starts at (plan.h VariableInit): model.init as the kind asks.
VariableInit initial_value(ParamInit init, const config::Init& model) {
  const VariableInit normal{InitKind::kNormal, model.weights_mean, model.weights_std};
  switch (init) {
    case ParamInit::kWeights:
      return normal;
    case ParamInit::kBiases:
      return model.biases_zero ? VariableInit{} : normal;
    case ParamInit::kZeros:
      return {};
    case ParamInit::kOnes:
      return {InitKind::kOnes};
  }
  return {};
}

// One variable's description, before its home is given.
struct VariableSpec {
  std::string name;
  VariableRole role = VariableRole::kWeight;
  TensorClass cls = TensorClass::kWeights;
  DType dtype = DType::kFloat32;
  VariableInit init;
  bool class_sharded = false;  // sharding.weights or sharding.optimizer_state
  bool remote = false;         // remote.weights or remote.optimizer_state
  std::string buffer;          // its remote buffer's name: the graph's, one row per layer
};

class Variables {
 public:
  explicit Variables(BuildState& b) : b_(b) {}

  int add(int k, const Shape& meta, const VariableSpec& spec) {
    const LayerInfo& l = b_.layer(k);
    Variable v;
    v.name = spec.name;
    v.layer = k;
    v.role = spec.role;
    v.cls = spec.cls;
    v.dtype = spec.dtype;
    v.init = spec.init;
    v.meta_shape = meta;
    v.nelms = 1;
    for (const std::int64_t d : meta) v.nelms *= d;
    v.sharded = b_.sharding_on && spec.class_sharded && v.nelms >= b_.c.sharding.threshold;
    v.shard_size = v.sharded ? shard_size(v.nelms, b_.n_shards()) : v.nelms;
    v.padding = v.sharded ? shard_padding(v.nelms, b_.n_shards()) : 0;
    v.remote = spec.remote;
    const Shape stored = v.sharded ? Shape{v.shard_size} : meta;
    if (spec.remote) {
      v.buffer = buffer(spec, stored, l.graph);
      v.entry = l.row;
    } else {
      v.device_tensor = b_.tensor(v.sharded ? v.name + ".shard" : v.name, spec.cls, spec.dtype,
                                  stored, /*always_live=*/true);
      b_.alloc(b_.p.setup, v.device_tensor);
    }
    b_.p.variables.push_back(v);
    return static_cast<int>(b_.p.variables.size()) - 1;
  }

 private:
  // The graph's buffer of the variable, one row per layer of the graph.
  int buffer(const VariableSpec& spec, const Shape& stored, int graph) {
    auto [it, added] = buffer_of_.emplace(spec.buffer, static_cast<int>(b_.p.buffers.size()));
    if (added) {
      RemoteBuffer rb;
      rb.name = spec.buffer;
      rb.cls = spec.cls;
      rb.dtype = spec.dtype;
      rb.element_shape = stored;
      rb.rows = static_cast<std::int64_t>(b_.graph_layers[static_cast<std::size_t>(graph)].size());
      rb.steps = 1;
      std::int64_t n = 1;
      for (const std::int64_t d : stored) n *= d;
      rb.entry_bytes =
          static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(dtype_size(spec.dtype));
      b_.p.buffers.push_back(rb);
    }
    return it->second;
  }

  BuildState& b_;
  std::unordered_map<std::string, int> buffer_of_;
};

}  // namespace

namespace {

// The layer a tied parameter names (config validation has checked it exists and comes
// first), or -1 when the layer sets no tie.
int tied_layer(const BuildState& b, int k, const ParamSpec& param) {
  if (param.tie_key.empty()) return -1;
  const config::AttributeValue* v = b.layer(k).attributes.find(param.tie_key);
  const std::string name = v != nullptr ? config::attribute_text(*v) : "";
  if (name.empty()) return -1;
  for (int j = 0; j < k; ++j)
    if (b.layer(j).name == name) return j;
  throw Error("layer {}: {} names '{}', which is not a layer before it", b.layer(k).name,
              param.tie_key, name);
}

}  // namespace

void add_variables(BuildState& b) {
  b.params.assign(static_cast<std::size_t>(b.n), {});
  b.owners.assign(static_cast<std::size_t>(b.n), {});
  Variables vars(b);
  const config::Config& c = b.c;
  for (int k = 0; k < b.n; ++k) {
    if (b.p.pipeline) b.stage = b.stage_of_layer[static_cast<std::size_t>(k)];
    const LayerInfo& l = b.layer(k);
    const std::string& graph = b.graph_names[static_cast<std::size_t>(l.graph)];
    for (const ParamSpec& param : b.kind(k).params) {
      const Shape meta = param.shape(l);
      auto& owners = b.owners[static_cast<std::size_t>(k)];
      if (const int j = tied_layer(b, k, param); j >= 0) {
        // One variable: the other layer's, of the same shape. Each layer accumulates its
        // own gradient; the owner's update adds them (build_phase.cpp: update_all; on
        // another pipeline stage, build_stage.cpp: TiedCopy).
        const ParamVars& theirs = b.param_vars(j, param.tied_param);
        if (b.var(theirs.value).meta_shape != meta)
          throw Error("layer {}: its {} is tied to {}, of another shape", l.name, param.suffix,
                      b.var(theirs.value).name);
        owners.push_back(b.owner(j, param.tied_param));
        b.params[static_cast<std::size_t>(k)].push_back(theirs);
        continue;
      }
      owners.emplace_back(k, static_cast<int>(owners.size()));
      const std::string base = fmt::format("{}.{}", l.name, param.suffix);
      const std::string gbase = fmt::format("{}.{}", graph, param.suffix);
      ParamVars pv;
      pv.value = vars.add(
          k, meta,
          {base, param.role, TensorClass::kWeights, param.dtype,
           initial_value(param.init, c.model.init), c.sharding.weights, c.remote.weights, gbase});
      if (!b.eval) {  // evaluation holds no optimizer state
        for (const OptimizerState& st : optimizer_state(c.training.optimizer))
          pv.state.push_back(vars.add(
              k, meta,
              {fmt::format("{}.{}", base, st.suffix), VariableRole::kOptimizerState,
               TensorClass::kOptimizerState, st.dtype, VariableInit{}, c.sharding.optimizer_state,
               c.remote.optimizer_state, fmt::format("{}.{}", gbase, st.suffix)}));
      }
      b.params[static_cast<std::size_t>(k)].push_back(std::move(pv));
    }
  }
  b.stage = -1;
}

}  // namespace popkit::planner::build
