// Plan -> JSON (schemas/plan.schema.json). Ops carry only the fields their kind uses;
// a field left out reads back as its default (plan_read.cpp), so files stay small and
// round-trip.
#include "planner/plan_json.h"

#include <fmt/format.h>

#include "planner/names.h"

namespace popkit::planner {
namespace {

using nlohmann::json;

template <typename E>
std::string name_of(E value) {
  return std::string(enum_name(value));
}

json grouping_json(const ReplicaGrouping& g) {
  return {{"factor", g.factor}, {"group_size", g.group_size}, {"stride", g.stride}};
}

json op_json(const Op& op) {
  json j = {{"kind", name_of(op.kind)}};
  if (!op.label.empty()) j["label"] = op.label;
  // Operands by position (planner/operands.h), -1 where a position is unused.
  if (!op.inputs.empty()) j["inputs"] = op.inputs;
  if (!op.outputs.empty()) j["outputs"] = op.outputs;
  if (!op.state.empty()) j["state"] = op.state;
  auto put = [&](const char* key, std::int64_t value) {
    if (value >= 0) j[key] = value;
  };
  put("buffer", op.buffer);
  put("entry", op.entry);
  put("row", op.row);
  if (op.preload) j["preload"] = true;
  switch (op.kind) {
    case OpKind::kHostLoad:
    case OpKind::kHostStore:
      j["stream"] = name_of(op.stream);
      break;
    case OpKind::kReduceScatter:
      j["shard_grouping"] = grouping_json(op.shard_grouping);
      [[fallthrough]];
    case OpKind::kAllReduce:
      j["reduce"] = name_of(op.reduce);
      [[fallthrough]];
    case OpKind::kAllGather:
    case OpKind::kSliceShard:
      j["grouping"] = grouping_json(op.grouping);
      break;
    default:
      break;
  }
  put("layer", op.layer);
  put("variable", op.variable);
  put("workspace", op.workspace);
  put("peer", op.peer);
  if (op.kind == OpKind::kRepeat) {
    j["steps"] = op.steps;
    j["io_mode"] = name_of(op.io_mode);
    json body = json::array();
    for (const Op& inner : op.body) body.push_back(op_json(inner));
    j["body"] = std::move(body);
  }
  j["cost"] = {{"flops", op.flops},
               {"host_bytes", op.host_bytes},
               {"remote_bytes", op.remote_bytes},
               {"collective_bytes", op.collective_bytes}};
  if (op.pipeline_bytes > 0) j["cost"]["pipeline_bytes"] = op.pipeline_bytes;
  return j;
}

json ops_json(const std::vector<Op>& ops) {
  json a = json::array();
  for (const Op& op : ops) a.push_back(op_json(op));
  return a;
}

json layers_json(const std::vector<LayerInfo>& layers) {
  json out = json::array();
  for (const auto& l : layers) {
    // The kind's keys beside the layer's shape (config/layer_kinds.h names none alike but
    // out_features, which is the output's width).
    json jl = json::object();
    put_attributes(jl, l.attributes);
    jl.update({{"name", l.name},
               {"type", l.kind},
               {"in_features", l.in_features},
               {"out_features", l.out_features},
               {"graph", l.graph},
               {"row", l.row}});
    if (l.sequence != 1) jl["sequence"] = l.sequence;
    out.push_back(std::move(jl));
  }
  return out;
}

json variables_json(const std::vector<Variable>& variables) {
  json out = json::array();
  for (const auto& v : variables) {
    json jv = {{"name", v.name},          {"layer", v.layer},          {"role", name_of(v.role)},
               {"class", name_of(v.cls)}, {"dtype", name_of(v.dtype)}, {"meta_shape", v.meta_shape},
               {"nelms", v.nelms},        {"sharded", v.sharded},      {"shard_size", v.shard_size},
               {"padding", v.padding},    {"remote", v.remote}};
    jv["init"] = {{"kind", name_of(v.init.kind)}};
    if (v.init.kind == InitKind::kNormal)
      jv["init"].update({{"mean", v.init.mean}, {"std", v.init.std}});
    if (v.remote) {
      jv["buffer"] = v.buffer;
      jv["entry"] = v.entry;
    } else {
      jv["device_tensor"] = v.device_tensor;
    }
    out.push_back(std::move(jv));
  }
  return out;
}

json tensors_json(const std::vector<DeviceTensor>& tensors) {
  json out = json::array();
  for (const auto& t : tensors) {
    json jt = {{"name", t.name},
               {"class", name_of(t.cls)},
               {"dtype", name_of(t.dtype)},
               {"shape", t.shape},
               {"nelms", t.nelms},
               {"nbytes", t.nbytes},
               {"always_live", t.always_live}};
    if (t.double_buffer >= 0) jt["double_buffer"] = t.double_buffer;
    if (t.stage >= 0) jt["stage"] = t.stage;
    out.push_back(std::move(jt));
  }
  return out;
}

json buffers_json(const std::vector<RemoteBuffer>& buffers) {
  json out = json::array();
  for (const auto& b : buffers)
    out.push_back({{"name", b.name},
                   {"class", name_of(b.cls)},
                   {"dtype", name_of(b.dtype)},
                   {"element_shape", b.element_shape},
                   {"rows", b.rows},
                   {"steps", b.steps},
                   {"entry_bytes", b.entry_bytes}});
  return out;
}

json phases_json(const std::vector<Phase>& phases) {
  json out = json::array();
  for (const auto& ph : phases) {
    json by_class = json::object();
    for (std::size_t c = 0; c < kNumTensorClasses; ++c)
      by_class[name_of(static_cast<TensorClass>(c))] = ph.memory.peak_by_class[c];
    out.push_back({{"name", ph.name},
                   {"ops", ops_json(ph.ops)},
                   {"memory",
                    {{"peak", ph.memory.peak},
                     {"always_live", ph.memory.always_live},
                     {"not_always_live", ph.memory.not_always_live},
                     {"peak_by_class", by_class}}},
                   {"estimated_seconds", ph.estimated_seconds}});
    if (ph.stage >= 0) {
      json& jp = out.back();
      jp["stage"] = ph.stage;
      json slots = json::array();
      for (const StageSlot& s : ph.slots)
        slots.push_back({{"work", s.work == PipelineWork::kForward ? "forward" : "backward"},
                         {"micro_batch", s.micro_batch},
                         {"first_op", s.first_op},
                         {"end_op", s.end_op}});
      jp["slots"] = std::move(slots);
    }
  }
  return out;
}

json pipeline_json(const PipelinePlan& pp) {
  json stages = json::array();
  for (const PipelineStagePlan& st : pp.stages)
    stages.push_back({{"first_layer", st.first_layer},
                      {"n_layers", st.n_layers},
                      {"stash_depth", st.stash_depth},
                      {"head_seconds", st.head_seconds},
                      {"forward_seconds", st.forward_seconds},
                      {"backward_seconds", st.backward_seconds},
                      {"tail_seconds", st.tail_seconds}});
  return {{"placement", pp.placement_auto ? "auto" : "explicit"},
          {"stages", std::move(stages)},
          {"planned_bubble", pp.planned_bubble},
          {"estimated_bubble", pp.estimated_bubble}};
}

json not_fitting_json(const NotFitting& nf) {
  json j = {{"phase", nf.phase},
            {"bytes_over", nf.bytes_over},
            {"largest", nf.largest},
            {"suggestions", nf.suggestions}};
  if (const auto& a = nf.advice)
    j["advice"] = {{"fits", a->fits},
                   {"settings", a->settings},
                   {"peak_bytes", a->peak_bytes},
                   {"samples_per_second", a->samples_per_second},
                   {"planned", a->n_planned}};
  return j;
}

}  // namespace

json attribute_json(const config::AttributeValue& value) {
  return std::visit([](const auto& v) { return json(v); }, value);
}

void put_attributes(json& into, const config::Attributes& attributes) {
  for (const config::Attribute& a : attributes.items()) into[a.key] = attribute_json(a.value);
}

json optimizer_json(const config::Optimizer& o) {
  // The common keys, then the kind's (config/optimizer_kinds.h).
  json j = {{"type", o.type}, {"lr", o.lr}, {"weight_decay", o.weight_decay}};
  put_attributes(j, o.attributes);
  return j;
}

nlohmann::json plan_to_json(const Plan& plan) {
  json j;
  j["version"] = plan.version;
  j["name"] = plan.name;
  j["program"] = name_of(plan.program);
  j["replication_factor"] = plan.replication_factor;
  j["micro_batch_size"] = plan.micro_batch_size;
  j["gradient_accumulation"] = plan.gradient_accumulation;
  j["global_batch_size"] = plan.global_batch_size;
  j["input_shape"] = plan.input_shape;
  j["n_classes"] = plan.n_classes;
  if (plan.positions != 1) j["positions"] = plan.positions;
  j["mode"] = name_of(plan.mode);
  j["io_mode"] = name_of(plan.io_mode);
  j["io_tiles"] = plan.io_tiles;
  j["variables_grouping"] = grouping_json(plan.variables_grouping);
  j["retrieval_mode"] = name_of(plan.retrieval_mode);
  j["sharding_grouping"] = grouping_json(plan.sharding_grouping);
  j["sharding_threshold"] = plan.sharding_threshold;
  j["optimizer"] = optimizer_json(plan.optimizer);
  j["seed"] = plan.seed;
  j["init_seed"] = plan.init_seed;
  j["layers"] = layers_json(plan.layers);
  j["variables"] = variables_json(plan.variables);
  j["tensors"] = tensors_json(plan.tensors);
  j["buffers"] = buffers_json(plan.buffers);
  j["setup"] = ops_json(plan.setup);
  j["phases"] = phases_json(plan.phases);
  j["sync_pattern"] = name_of(plan.sync_pattern);
  if (plan.pipeline) j["pipeline"] = pipeline_json(*plan.pipeline);
  j["peak_bytes"] = plan.peak_bytes;
  j["peak_phase"] = plan.peak_phase;
  j["always_live_bytes"] = plan.always_live_bytes;
  j["streaming_bytes"] = plan.streaming_bytes;
  j["host_bytes_per_step"] = plan.host_bytes_per_step;
  j["memory_per_replica"] = plan.memory_per_replica;
  j["fits"] = plan.fits;
  if (!plan.fits) j["not_fitting"] = not_fitting_json(plan.not_fitting);
  j["device_profile"] = plan.device_profile;
  j["device_kind"] = plan.device_kind;
  // Only from a profile that measured it: other plans stay as they were.
  if (plan.device_core_round_trip_seconds > 0)
    j["device_core_round_trip_seconds"] = plan.device_core_round_trip_seconds;
  if (plan.device_cache_probe_seconds > 0)
    j["device_cache_probe_seconds"] = plan.device_cache_probe_seconds;
  j["estimated_step_seconds"] = plan.estimated_step_seconds;
  j["estimated_samples_per_second"] = plan.estimated_samples_per_second;
  if (plan.network) {  // only when priced with a network profile: other plans stay as they were
    const NetworkEstimate& n = *plan.network;
    j["network"] = {{"replicas_per_host", n.replicas_per_host},
                    {"n_hosts", n.n_hosts},
                    {"bytes_per_second", n.bytes_per_second},
                    {"latency_seconds", n.latency_seconds},
                    {"on_host_bytes", n.on_host_bytes},
                    {"cross_host_bytes", n.cross_host_bytes},
                    {"network_bytes", n.network_bytes},
                    {"busiest_link_bytes", n.busiest_link_bytes},
                    {"messages", n.messages},
                    {"seconds", n.seconds}};
  }
  const HostMemory& h = plan.host_memory;
  j["host_memory"] = {{"total", h.total()},
                      {"datasets", h.datasets},
                      {"datasets_counted", h.datasets_counted},
                      {"streaming", h.streaming},
                      {"device", h.device},
                      {"host_buffers", h.host_buffers},
                      {"overhead", h.overhead}};
  j["warnings"] = plan.warnings;
  return j;
}
}  // namespace popkit::planner
