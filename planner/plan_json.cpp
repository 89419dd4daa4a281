// Plan -> JSON (schemas/plan.schema.json). Ops carry only the fields their kind uses;
// a field left out reads back as its default (plan_read.cpp), so files stay small and
// round-trip.
#include "planner/plan_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <sstream>

#include "planner/fit_advice.h"
#include "planner/json_writer.h"
#include "planner/names.h"

namespace popkit::planner {
namespace {

using nlohmann::json;

void write_grouping(JsonWriter& w, const ReplicaGrouping& g) {
  w.begin_object();
  w.key("factor").value(g.factor).key("group_size").value(g.group_size);
  w.key("stride").value(g.stride);
  w.end_object();
}

// Keys in the order a DOM keeps them (json_writer.h): alphabetical.
void write_op(JsonWriter& w, const Op& op) {
  w.begin_object();
  if (op.kind == OpKind::kRepeat) {
    w.key("body").begin_array();
    for (const Op& inner : op.body) write_op(w, inner);
    w.end_array();
  }
  auto put = [&](const char* key, std::int64_t value) {
    if (value >= 0) w.key(key).value(value);
  };
  put("buffer", op.buffer);
  w.key("cost").begin_object();
  w.key("collective_bytes").value(op.collective_bytes).key("flops").value(op.flops);
  w.key("host_bytes").value(op.host_bytes);
  if (op.pipeline_bytes > 0) w.key("pipeline_bytes").value(op.pipeline_bytes);
  w.key("remote_bytes").value(op.remote_bytes);
  w.end_object();
  put("entry", op.entry);
  const bool reduces = op.kind == OpKind::kReduceScatter || op.kind == OpKind::kAllReduce;
  const bool grouped = reduces || op.kind == OpKind::kAllGather || op.kind == OpKind::kSliceShard;
  if (grouped) write_grouping(w.key("grouping"), op.grouping);
  // Operands by position (planner/operands.h), -1 where a position is unused.
  if (!op.inputs.empty()) w.key("inputs").values(op.inputs);
  if (op.kind == OpKind::kRepeat) w.key("io_mode").value(enum_name(op.io_mode));
  w.key("kind").value(enum_name(op.kind));
  if (!op.label.empty()) w.key("label").value(op.label);
  put("layer", op.layer);
  if (!op.outputs.empty()) w.key("outputs").values(op.outputs);
  put("peer", op.peer);
  if (op.preload) w.key("preload").value(true);
  if (reduces) w.key("reduce").value(enum_name(op.reduce));
  put("row", op.row);
  if (op.kind == OpKind::kReduceScatter) write_grouping(w.key("shard_grouping"), op.shard_grouping);
  if (!op.state.empty()) w.key("state").values(op.state);
  if (op.kind == OpKind::kRepeat) w.key("steps").value(op.steps);
  if (op.kind == OpKind::kHostLoad || op.kind == OpKind::kHostStore)
    w.key("stream").value(enum_name(op.stream));
  put("variable", op.variable);
  put("workspace", op.workspace);
  w.end_object();
}

void write_ops(JsonWriter& w, const std::vector<Op>& ops) {
  w.begin_array();
  for (const Op& op : ops) write_op(w, op);
  w.end_array();
}

void write_attribute(JsonWriter& w, const config::AttributeValue& value) {
  std::visit([&](const auto& v) { w.value(v); }, value);
}

// A layer's shape beside its kind's keys (config/layer_kinds.h names none alike but
// out_features, which is the output's width: the shape's wins, as a DOM's update does).
void write_layer(JsonWriter& w, const LayerInfo& l) {
  enum Field { kGraph, kInFeatures, kName, kOutFeatures, kRow, kSequence, kType, kFields };
  static constexpr std::array<std::string_view, kFields> kKeys = {
      "graph", "in_features", "name", "out_features", "row", "sequence", "type"};
  auto write_field = [&](int f) {
    w.key(kKeys[static_cast<std::size_t>(f)]);
    switch (f) {
      case kGraph:
        w.value(l.graph);
        break;
      case kInFeatures:
        w.value(l.in_features);
        break;
      case kName:
        w.value(l.name);
        break;
      case kOutFeatures:
        w.value(l.out_features);
        break;
      case kRow:
        w.value(l.row);
        break;
      case kSequence:
        w.value(l.sequence);
        break;
      default:
        w.value(l.kind);
        break;
    }
  };
  std::vector<const config::Attribute*> attributes;
  for (const config::Attribute& a : l.attributes.items())
    if (std::find(kKeys.begin(), kKeys.end(), a.key) == kKeys.end()) attributes.push_back(&a);
  std::sort(attributes.begin(), attributes.end(),
            [](const auto* a, const auto* b) { return a->key < b->key; });
  w.begin_object();
  auto next = attributes.begin();
  for (int f = 0; f < kFields; ++f) {
    if (f == kSequence && l.sequence == 1) continue;
    for (; next != attributes.end() && (*next)->key < kKeys[static_cast<std::size_t>(f)]; ++next)
      write_attribute(w.key((*next)->key), (*next)->value);
    write_field(f);
  }
  for (; next != attributes.end(); ++next) write_attribute(w.key((*next)->key), (*next)->value);
  w.end_object();
}

void write_variable(JsonWriter& w, const Variable& v) {
  w.begin_object();
  if (v.remote) w.key("buffer").value(v.buffer);
  w.key("class").value(enum_name(v.cls));
  if (!v.remote) w.key("device_tensor").value(v.device_tensor);
  w.key("dtype").value(enum_name(v.dtype));
  if (v.remote) w.key("entry").value(v.entry);
  w.key("init").begin_object().key("kind").value(enum_name(v.init.kind));
  if (v.init.kind == InitKind::kNormal)
    w.key("mean").value(v.init.mean).key("std").value(v.init.std);
  w.end_object();
  w.key("layer").value(v.layer).key("meta_shape").values(v.meta_shape);
  w.key("name").value(v.name).key("nelms").value(v.nelms).key("padding").value(v.padding);
  w.key("remote").value(v.remote).key("role").value(enum_name(v.role));
  w.key("shard_size").value(v.shard_size).key("sharded").value(v.sharded);
  w.end_object();
}

void write_tensor(JsonWriter& w, const DeviceTensor& t) {
  w.begin_object();
  w.key("always_live").value(t.always_live).key("class").value(enum_name(t.cls));
  if (t.double_buffer >= 0) w.key("double_buffer").value(t.double_buffer);
  w.key("dtype").value(enum_name(t.dtype)).key("name").value(t.name);
  w.key("nbytes").value(t.nbytes).key("nelms").value(t.nelms).key("shape").values(t.shape);
  if (t.stage >= 0) w.key("stage").value(t.stage);
  w.end_object();
}

void write_buffer(JsonWriter& w, const RemoteBuffer& b) {
  w.begin_object();
  w.key("class").value(enum_name(b.cls)).key("dtype").value(enum_name(b.dtype));
  w.key("element_shape").values(b.element_shape).key("entry_bytes").value(b.entry_bytes);
  w.key("name").value(b.name).key("rows").value(b.rows).key("steps").value(b.steps);
  w.end_object();
}

// The tensor classes by name, in a DOM's order.
std::array<TensorClass, kNumTensorClasses> classes_by_name() {
  std::array<TensorClass, kNumTensorClasses> order{};
  for (std::size_t c = 0; c < kNumTensorClasses; ++c) order[c] = static_cast<TensorClass>(c);
  std::sort(order.begin(), order.end(),
            [](TensorClass a, TensorClass b) { return enum_name(a) < enum_name(b); });
  return order;
}

void write_phase(JsonWriter& w, const Phase& ph) {
  static const std::array<TensorClass, kNumTensorClasses> kByName = classes_by_name();
  w.begin_object();
  w.key("estimated_seconds").value(ph.estimated_seconds);
  w.key("memory").begin_object();
  w.key("always_live").value(ph.memory.always_live);
  w.key("not_always_live").value(ph.memory.not_always_live).key("peak").value(ph.memory.peak);
  w.key("peak_by_class").begin_object();
  for (const TensorClass c : kByName)
    w.key(enum_name(c)).value(ph.memory.peak_by_class[static_cast<std::size_t>(c)]);
  w.end_object().end_object();
  w.key("name").value(ph.name);
  write_ops(w.key("ops"), ph.ops);
  if (ph.stage >= 0) {
    w.key("slots").begin_array();
    for (const StageSlot& s : ph.slots) {
      w.begin_object().key("end_op").value(s.end_op).key("first_op").value(s.first_op);
      w.key("micro_batch").value(s.micro_batch);
      w.key("work").value(s.work == PipelineWork::kForward ? "forward" : "backward");
      w.end_object();
    }
    w.end_array();
    w.key("stage").value(ph.stage);
  }
  w.end_object();
}

template <typename T, typename Write>
void write_array(JsonWriter& w, const std::vector<T>& items, Write&& write) {
  w.begin_array();
  for (const T& item : items) write(w, item);
  w.end_array();
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
  if (const auto& a = nf.advice) j["advice"] = fit_advice_json(*a);
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

void write_plan_json(std::ostream& out, const Plan& plan) {
  JsonWriter w(out);
  w.begin_object();
  w.key("always_live_bytes").value(plan.always_live_bytes);
  write_array(w.key("buffers"), plan.buffers, write_buffer);
  // Only from a profile that measured it: other plans stay as they were.
  if (plan.device_cache_probe_seconds > 0)
    w.key("device_cache_probe_seconds").value(plan.device_cache_probe_seconds);
  if (plan.device_core_round_trip_seconds > 0)
    w.key("device_core_round_trip_seconds").value(plan.device_core_round_trip_seconds);
  w.key("device_kind").value(plan.device_kind).key("device_profile").value(plan.device_profile);
  w.key("estimated_samples_per_second").value(plan.estimated_samples_per_second);
  w.key("estimated_step_seconds").value(plan.estimated_step_seconds);
  w.key("fits").value(plan.fits);
  w.key("global_batch_size").value(plan.global_batch_size);
  w.key("gradient_accumulation").value(plan.gradient_accumulation);
  w.key("host_bytes_per_step").value(plan.host_bytes_per_step);
  const HostMemory& h = plan.host_memory;
  w.key("host_memory").begin_object();
  w.key("datasets").value(h.datasets).key("datasets_counted").value(h.datasets_counted);
  w.key("device").value(h.device).key("host_buffers").value(h.host_buffers);
  w.key("overhead").value(h.overhead).key("streaming").value(h.streaming);
  w.key("total").value(h.total());
  w.end_object();
  w.key("init_seed").value(plan.init_seed).key("input_shape").values(plan.input_shape);
  w.key("io_mode").value(enum_name(plan.io_mode)).key("io_tiles").value(plan.io_tiles);
  write_array(w.key("layers"), plan.layers, write_layer);
  w.key("memory_per_replica").value(plan.memory_per_replica);
  w.key("micro_batch_size").value(plan.micro_batch_size);
  w.key("mode").value(enum_name(plan.mode));
  w.key("n_classes").value(plan.n_classes).key("name").value(plan.name);
  if (plan.network) {  // only when priced with a network profile: other plans stay as they were
    const NetworkEstimate& n = *plan.network;
    w.key("network").begin_object();
    w.key("busiest_link_bytes").value(n.busiest_link_bytes);
    w.key("bytes_per_second").value(n.bytes_per_second);
    w.key("cross_host_bytes").value(n.cross_host_bytes);
    w.key("latency_seconds").value(n.latency_seconds).key("messages").value(n.messages);
    w.key("n_hosts").value(n.n_hosts).key("network_bytes").value(n.network_bytes);
    w.key("on_host_bytes").value(n.on_host_bytes);
    w.key("replicas_per_host").value(n.replicas_per_host).key("seconds").value(n.seconds);
    w.end_object();
  }
  if (!plan.fits) w.key("not_fitting").value(not_fitting_json(plan.not_fitting));
  w.key("optimizer").value(optimizer_json(plan.optimizer));
  w.key("peak_bytes").value(plan.peak_bytes).key("peak_phase").value(plan.peak_phase);
  write_array(w.key("phases"), plan.phases, write_phase);
  if (plan.pipeline) w.key("pipeline").value(pipeline_json(*plan.pipeline));
  if (plan.positions != 1) w.key("positions").value(plan.positions);
  w.key("program").value(enum_name(plan.program));
  w.key("replication_factor").value(plan.replication_factor);
  w.key("retrieval_mode").value(enum_name(plan.retrieval_mode));
  w.key("seed").value(plan.seed);
  write_ops(w.key("setup"), plan.setup);
  write_grouping(w.key("sharding_grouping"), plan.sharding_grouping);
  w.key("sharding_threshold").value(plan.sharding_threshold);
  w.key("streaming_bytes").value(plan.streaming_bytes);
  w.key("sync_pattern").value(enum_name(plan.sync_pattern));
  write_array(w.key("tensors"), plan.tensors, write_tensor);
  write_array(w.key("variables"), plan.variables, write_variable);
  write_grouping(w.key("variables_grouping"), plan.variables_grouping);
  w.key("version").value(plan.version).key("warnings").values(plan.warnings);
  w.end_object();
  w.finish();
}

nlohmann::json plan_to_json(const Plan& plan) {
  std::ostringstream text;
  write_plan_json(text, plan);
  return json::parse(text.str());
}
}  // namespace popkit::planner
