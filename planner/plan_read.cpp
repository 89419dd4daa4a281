// JSON -> Plan: plan files read with a path in every error, their big arrays split off
// while the text is parsed (PlanSplit). The writer is plan_json.cpp.
#include <fmt/format.h>

#include <limits>
#include <type_traits>
#include <variant>

#include "base/error.h"
#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/layer_ops.h"
#include "planner/memory.h"
#include "planner/names.h"
#include "planner/plan_fields.h"
#include "planner/plan_json.h"

namespace popkit::planner {

// The arrays a PlanSplit read; array numbers say the element type (id % kTypes).
struct PlanSplit::Arrays {
  static constexpr unsigned kTypes = 5;
  SplitArrays<LayerInfo> layers{0, kTypes};
  SplitArrays<Variable> variables{1, kTypes};
  SplitArrays<DeviceTensor> tensors{2, kTypes};
  SplitArrays<RemoteBuffer> buffers{3, kTypes};
  SplitArrays<Op> ops{4, kTypes};
};

namespace {

using nlohmann::json;

// 2: ops name their tensors in inputs, outputs and state lists (planner/operands.h).
// 3: the workspace class and an op's workspace tensor (planner/workspace.h).
// 4: a layer's keys are its kind's (config/layer_kinds.h): a dropout layer has no
//    activation.
// 5: each variable's initialiser ("init") and the plan's "init_seed".
constexpr int kPlanVersion = 6;

// Reads a Plan, its elements from the split the DOM was parsed with where it holds them.
class Reader : public FieldReader {
 public:
  explicit Reader(const std::string& file, PlanSplit::Arrays* split = nullptr)
      : FieldReader(file), split_(split) {}

  Op op(const json& j, const std::string& path) const {
    Op o;
    o.kind = enumeration<OpKind>(j, path, "kind");
    if (j.contains("label")) o.label = string(j, path, "label");
    o.inputs = operands(j, path, "inputs");
    o.outputs = operands(j, path, "outputs");
    o.state = operands(j, path, "state");
    o.buffer = small_or(j, path, "buffer", -1);
    o.entry = j.contains("entry") ? integer(j, path, "entry") : -1;
    o.row = j.contains("row") ? integer(j, path, "row") : -1;
    o.preload = j.contains("preload") && boolean(j, path, "preload");
    if (j.contains("stream")) o.stream = enumeration<Stream>(j, path, "stream");
    if (j.contains("grouping")) o.grouping = grouping(j, path, "grouping");
    if (j.contains("shard_grouping")) o.shard_grouping = grouping(j, path, "shard_grouping");
    if (j.contains("reduce")) o.reduce = enumeration<ReduceOp>(j, path, "reduce");
    o.layer = small_or(j, path, "layer", -1);
    o.variable = small_or(j, path, "variable", -1);
    o.workspace = small_or(j, path, "workspace", -1);
    o.peer = small_or(j, path, "peer", -1);
    if (o.kind == OpKind::kRepeat) {
      o.steps = integer(j, path, "steps");
      o.io_mode = enumeration<IoMode>(j, path, "io_mode");
      o.body = list<Op>(j, path, "body", nullptr,
                        [this](const json& e, const std::string& p) { return op(e, p); });
    }
    if (j.contains("cost")) {
      const json& c = j["cost"];
      const std::string p = join(path, "cost");
      o.flops = bytes(c, p, "flops");
      o.host_bytes = bytes(c, p, "host_bytes");
      o.remote_bytes = bytes(c, p, "remote_bytes");
      o.collective_bytes = bytes(c, p, "collective_bytes");
      if (c.contains("pipeline_bytes")) o.pipeline_bytes = bytes(c, p, "pipeline_bytes");
    }
    return o;
  }

  std::vector<Op> ops(const json& obj, const std::string& path, const char* key) const {
    return list<Op>(obj, path, key, split_ != nullptr ? &split_->ops : nullptr,
                    [this](const json& e, const std::string& p) { return op(e, p); });
  }

  LayerInfo layer(const json& j, const std::string& path) const {
    LayerInfo l;
    l.name = string(j, path, "name");
    l.kind = name_in(j, path, "type", config::layer_kind_names());
    l.in_features = integer(j, path, "in_features");
    l.out_features = integer(j, path, "out_features");
    l.attributes = attributes(j, path, config::layer_kind_rules(l.kind).keys);
    l.graph = small_or(j, path, "graph", 0);
    l.row = small_or(j, path, "row", 0);
    if (j.contains("sequence")) l.sequence = integer(j, path, "sequence");
    return l;
  }

  Variable variable(const json& j, const std::string& path) const {
    Variable v;
    v.name = string(j, path, "name");
    v.layer = small_or(j, path, "layer", 0);
    v.role = enumeration<VariableRole>(j, path, "role");
    v.cls = enumeration<TensorClass>(j, path, "class");
    v.dtype = enumeration<DType>(j, path, "dtype");
    const json& init = field(j, path, "init");
    const std::string at = join(path, "init");
    v.init.kind = enumeration<InitKind>(init, at, "kind");
    if (v.init.kind == InitKind::kNormal) {
      v.init.mean = number(init, at, "mean");
      v.init.std = number(init, at, "std");
    }
    v.meta_shape = shape(j, path, "meta_shape");
    v.nelms = integer(j, path, "nelms");
    v.sharded = boolean(j, path, "sharded");
    v.shard_size = integer(j, path, "shard_size");
    v.padding = integer(j, path, "padding");
    v.remote = boolean(j, path, "remote");
    if (v.remote) {
      v.buffer = small(j, path, "buffer");
      v.entry = integer(j, path, "entry");
    } else {
      v.device_tensor = small(j, path, "device_tensor");
    }
    return v;
  }

  DeviceTensor tensor(const json& j, const std::string& path) const {
    DeviceTensor t;
    t.name = string(j, path, "name");
    t.cls = enumeration<TensorClass>(j, path, "class");
    t.dtype = enumeration<DType>(j, path, "dtype");
    t.shape = shape(j, path, "shape");
    t.nelms = integer(j, path, "nelms");
    t.nbytes = bytes(j, path, "nbytes");
    t.always_live = boolean(j, path, "always_live");
    t.double_buffer = small_or(j, path, "double_buffer", -1);
    t.stage = small_or(j, path, "stage", -1);
    return t;
  }

  RemoteBuffer buffer(const json& j, const std::string& path) const {
    RemoteBuffer b;
    b.name = string(j, path, "name");
    b.cls = enumeration<TensorClass>(j, path, "class");
    b.dtype = enumeration<DType>(j, path, "dtype");
    b.element_shape = shape(j, path, "element_shape");
    b.rows = integer(j, path, "rows");
    b.steps = integer(j, path, "steps");
    b.entry_bytes = bytes(j, path, "entry_bytes");
    return b;
  }

  Plan plan(const json& j) const;

 private:
  void header(const json& j, Plan& p) const;
  void elements(const json& j, Plan& p) const;
  Phase phase(const json& jp, const std::string& path, std::int64_t gradient_accumulation) const;
  PipelinePlan pipeline(const json& jp, std::size_t n_plan_layers) const;
  NotFitting not_fitting(const json& nf) const;
  void estimates(const json& j, Plan& p) const;

  PlanSplit::Arrays* split_;
};

}  // namespace

PlanSplit::PlanSplit(std::string filename)
    : filename_(std::move(filename)), arrays_(std::make_unique<Arrays>()) {}

PlanSplit::~PlanSplit() = default;

std::optional<std::uint64_t> PlanSplit::begin_array(const JsonPath& path) {
  Arrays& a = *arrays_;
  if (path.matches({"phases", "[]", "ops"}) || path.matches({"setup"})) return a.ops.begin(path);
  if (path.matches({"layers"})) return a.layers.begin(path);
  if (path.matches({"variables"})) return a.variables.begin(path);
  if (path.matches({"tensors"})) return a.tensors.begin(path);
  if (path.matches({"buffers"})) return a.buffers.begin(path);
  return std::nullopt;
}

void PlanSplit::element(std::uint64_t array, std::size_t index, nlohmann::json&& value) {
  const Reader r(filename_);
  Arrays& a = *arrays_;
  if (a.ops.owns(array)) {
    a.ops.add(array, index, value, [&](const json& e, const std::string& p) { return r.op(e, p); });
  } else if (a.layers.owns(array)) {
    a.layers.add(array, index, value,
                 [&](const json& e, const std::string& p) { return r.layer(e, p); });
  } else if (a.variables.owns(array)) {
    a.variables.add(array, index, value,
                    [&](const json& e, const std::string& p) { return r.variable(e, p); });
  } else if (a.tensors.owns(array)) {
    a.tensors.add(array, index, value,
                  [&](const json& e, const std::string& p) { return r.tensor(e, p); });
  } else {
    a.buffers.add(array, index, value,
                  [&](const json& e, const std::string& p) { return r.buffer(e, p); });
  }
}

namespace {

Plan Reader::plan(const json& j) const {
  Plan p;
  if (!j.is_object()) fail("(top level)", "expected an object");
  header(j, p);
  elements(j, p);
  const json& phases = array(j, "", "phases");
  for (std::size_t i = 0; i < phases.size(); ++i)
    p.phases.push_back(phase(phases[i], index("phases", i), p.gradient_accumulation));
  if (j.contains("sync_pattern"))
    p.sync_pattern = enumeration<config::SyncPattern>(j, "", "sync_pattern");
  if (j.contains("pipeline")) p.pipeline = pipeline(field(j, "", "pipeline"), p.layers.size());
  p.peak_bytes = bytes(j, "", "peak_bytes");
  p.peak_phase = small(j, "", "peak_phase");
  p.always_live_bytes = bytes(j, "", "always_live_bytes");
  p.streaming_bytes = bytes(j, "", "streaming_bytes");
  p.host_bytes_per_step = bytes(j, "", "host_bytes_per_step");
  p.memory_per_replica = bytes(j, "", "memory_per_replica");
  p.fits = boolean(j, "", "fits");
  if (!p.fits) p.not_fitting = not_fitting(field(j, "", "not_fitting"));
  estimates(j, p);
  if (j.contains("warnings")) p.warnings = strings(j, "", "warnings");
  // The ops must reference tensors that exist and are live when used.
  try {
    check_plan(p);
  } catch (const Error& e) {
    throw Error("{}: {}", file(), e.what());
  }
  return p;
}

// The format's version, the run's shape and its settings.
void Reader::header(const json& j, Plan& p) const {
  const std::int64_t version = integer(j, "", "version");
  if (version > kPlanVersion)
    fail("version",
         fmt::format("plan format {} is newer than this build reads ({})", version, kPlanVersion));
  if (version < kPlanVersion)
    fail("version", fmt::format("plan format {} is older than this build reads ({}): plan the "
                                "config again with this build's popplan plan",
                                version, kPlanVersion));
  p.version = static_cast<int>(version);
  p.name = string(j, "", "name");
  // Training plans written before evaluation had plans of its own have no "program".
  p.program = j.contains("program") ? enumeration<Program>(j, "", "program") : Program::kTrain;
  p.replication_factor = integer(j, "", "replication_factor");
  p.micro_batch_size = integer(j, "", "micro_batch_size");
  p.gradient_accumulation = integer(j, "", "gradient_accumulation");
  p.global_batch_size = integer(j, "", "global_batch_size");
  p.input_shape = shape(j, "", "input_shape");
  p.n_classes = integer(j, "", "n_classes");
  if (j.contains("positions")) p.positions = integer(j, "", "positions");
  p.mode = enumeration<config::ExecutionMode>(j, "", "mode");
  p.io_mode = enumeration<IoMode>(j, "", "io_mode");
  p.io_tiles = j.contains("io_tiles") ? integer(j, "", "io_tiles") : 0;
  p.variables_grouping = grouping(j, "", "variables_grouping");
  p.retrieval_mode = enumeration<RetrievalMode>(j, "", "retrieval_mode");
  p.sharding_grouping = grouping(j, "", "sharding_grouping");
  p.sharding_threshold = integer(j, "", "sharding_threshold");
  const json& o = field(j, "", "optimizer");
  p.optimizer.type = name_in(o, "optimizer", "type", config::optimizer_kind_names());
  // The common keys, then the kind's (config/optimizer_kinds.h), each as its type.
  p.optimizer.lr = number(o, "optimizer", "lr");
  p.optimizer.weight_decay = number(o, "optimizer", "weight_decay");
  p.optimizer.attributes =
      attributes(o, "optimizer", config::optimizer_kind_rules(p.optimizer.type).keys);
  p.seed = bytes(j, "", "seed");
  p.init_seed = bytes(j, "", "init_seed");
}

// The big arrays: layers (each held to its kind's rules), variables, tensors, buffers and
// the set-up ops.
void Reader::elements(const json& j, Plan& p) const {
  auto from = [this](auto member) { return split_ != nullptr ? &(split_->*member) : nullptr; };
  p.layers = list<LayerInfo>(j, "", "layers", from(&PlanSplit::Arrays::layers),
                             [this](const json& e, const std::string& at) { return layer(e, at); });
  for (std::size_t i = 0; i < p.layers.size(); ++i)  // what its kind allows
    if (const std::string e = layer_error(p.layers[i]); !e.empty()) fail(index("layers", i), e);
  p.variables =
      list<Variable>(j, "", "variables", from(&PlanSplit::Arrays::variables),
                     [this](const json& e, const std::string& at) { return variable(e, at); });
  p.tensors =
      list<DeviceTensor>(j, "", "tensors", from(&PlanSplit::Arrays::tensors),
                         [this](const json& e, const std::string& at) { return tensor(e, at); });
  p.buffers =
      list<RemoteBuffer>(j, "", "buffers", from(&PlanSplit::Arrays::buffers),
                         [this](const json& e, const std::string& at) { return buffer(e, at); });
  p.setup = ops(j, "", "setup");
}

// A phase: its ops, its memory and, in a pipelined plan, its stage's slots.
Phase Reader::phase(const json& jp, const std::string& path,
                    std::int64_t gradient_accumulation) const {
  Phase ph;
  ph.name = string(jp, path, "name");
  ph.ops = ops(jp, path, "ops");
  const json& m = field(jp, path, "memory");
  const std::string mp = join(path, "memory");
  ph.memory.peak = bytes(m, mp, "peak");
  ph.memory.always_live = bytes(m, mp, "always_live");
  ph.memory.not_always_live = bytes(m, mp, "not_always_live");
  const json& by = field(m, mp, "peak_by_class");
  for (std::size_t c = 0; c < kNumTensorClasses; ++c) {
    const std::string key(tensor_class_name(static_cast<TensorClass>(c)));
    ph.memory.peak_by_class[c] = bytes(by, join(mp, "peak_by_class"), key.c_str());
  }
  ph.estimated_seconds = non_negative(jp, path, "estimated_seconds");
  ph.stage = small_or(jp, path, "stage", -1);
  if (!jp.contains("slots")) return ph;
  const std::string sp = join(path, "slots");
  const json& slots = array(jp, path, "slots");
  for (std::size_t k = 0; k < slots.size(); ++k) {
    const std::string at = index(sp, k);
    StageSlot slot;
    const std::string work = string(slots[k], at, "work");
    if (work != "forward" && work != "backward")
      fail(join(at, "work"), fmt::format("expected forward or backward, got '{}'", work));
    slot.work = work == "forward" ? PipelineWork::kForward : PipelineWork::kBackward;
    slot.micro_batch = integer_in(slots[k], at, "micro_batch", 0, gradient_accumulation - 1);
    const auto n_ops = static_cast<std::int64_t>(ph.ops.size());
    slot.first_op = integer_in(slots[k], at, "first_op", 0, n_ops);
    slot.end_op = integer_in(slots[k], at, "end_op", slot.first_op, n_ops);
    ph.slots.push_back(slot);
  }
  return ph;
}

PipelinePlan Reader::pipeline(const json& jp, std::size_t n_plan_layers) const {
  PipelinePlan pp;
  pp.placement_auto = string(jp, "pipeline", "placement") == "auto";
  pp.planned_bubble = non_negative(jp, "pipeline", "planned_bubble");
  pp.estimated_bubble = non_negative(jp, "pipeline", "estimated_bubble");
  const json& stages = array(jp, "pipeline", "stages");
  const auto n_layers = static_cast<std::int64_t>(n_plan_layers);
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const std::string at = index("pipeline.stages", k);
    PipelineStagePlan st;
    st.first_layer = static_cast<int>(integer_in(stages[k], at, "first_layer", 0, n_layers - 1));
    st.n_layers = static_cast<int>(integer_in(stages[k], at, "n_layers", 1, n_layers));
    st.stash_depth = integer_in(stages[k], at, "stash_depth", 1, kMaxInt64);
    st.head_seconds = non_negative(stages[k], at, "head_seconds");
    st.forward_seconds = non_negative(stages[k], at, "forward_seconds");
    st.backward_seconds = non_negative(stages[k], at, "backward_seconds");
    st.tail_seconds = non_negative(stages[k], at, "tail_seconds");
    pp.stages.push_back(st);
  }
  return pp;
}

NotFitting Reader::not_fitting(const json& nf) const {
  NotFitting out;
  out.phase = string(nf, "not_fitting", "phase");
  out.bytes_over = bytes(nf, "not_fitting", "bytes_over");
  out.largest = strings(nf, "not_fitting", "largest");
  out.suggestions = strings(nf, "not_fitting", "suggestions");
  if (nf.contains("advice")) {  // only popplan plan asks the tuner
    const json& ja = field(nf, "not_fitting", "advice");
    const std::string at = "not_fitting.advice";
    FitAdvice a;
    a.fits = boolean(ja, at, "fits");
    a.settings = strings(ja, at, "settings");
    a.peak_bytes = bytes(ja, at, "peak_bytes");
    a.samples_per_second = non_negative(ja, at, "samples_per_second");
    a.n_planned = bytes(ja, at, "planned");
    out.advice = std::move(a);
  }
  return out;
}

// The device priced for, the time and network estimates and the host's memory.
void Reader::estimates(const json& j, Plan& p) const {
  p.device_profile = string(j, "", "device_profile");
  // Plans written before device_kind: the built-in cpu profile was the only CPU's.
  p.device_kind = j.contains("device_kind")   ? string(j, "", "device_kind")
                  : p.device_profile == "cpu" ? "cpu"
                                              : "ipu";
  if (j.contains("device_core_round_trip_seconds"))
    p.device_core_round_trip_seconds = non_negative(j, "", "device_core_round_trip_seconds");
  if (j.contains("device_cache_probe_seconds"))
    p.device_cache_probe_seconds = non_negative(j, "", "device_cache_probe_seconds");
  p.estimated_step_seconds = non_negative(j, "", "estimated_step_seconds");
  p.estimated_samples_per_second = non_negative(j, "", "estimated_samples_per_second");
  if (j.contains("network")) {  // only plans priced with a network profile hold it
    const json& jn = field(j, "", "network");
    NetworkEstimate n;
    n.replicas_per_host = integer_in(jn, "network", "replicas_per_host", 1, kMaxInt64);
    n.n_hosts = integer_in(jn, "network", "n_hosts", 1, kMaxInt64);
    n.bytes_per_second = non_negative(jn, "network", "bytes_per_second");
    n.latency_seconds = non_negative(jn, "network", "latency_seconds");
    n.on_host_bytes = bytes(jn, "network", "on_host_bytes");
    n.cross_host_bytes = bytes(jn, "network", "cross_host_bytes");
    n.network_bytes = bytes(jn, "network", "network_bytes");
    n.busiest_link_bytes = bytes(jn, "network", "busiest_link_bytes");
    n.messages = bytes(jn, "network", "messages");
    n.seconds = non_negative(jn, "network", "seconds");
    p.network = n;
  }
  if (j.contains("host_memory")) {  // plans written before it was estimated lack it
    const json& h = field(j, "", "host_memory");
    p.host_memory.datasets = bytes(h, "host_memory", "datasets");
    p.host_memory.datasets_counted = boolean(h, "host_memory", "datasets_counted");
    p.host_memory.streaming = bytes(h, "host_memory", "streaming");
    p.host_memory.device = bytes(h, "host_memory", "device");
    p.host_memory.host_buffers = bytes(h, "host_memory", "host_buffers");
    p.host_memory.overhead = bytes(h, "host_memory", "overhead");
  }
}

}  // namespace

Plan plan_from_json(const nlohmann::json& j, const std::string& filename, PlanSplit* split) {
  return Reader(filename, split != nullptr ? &split->arrays() : nullptr).plan(j);
}

Plan plan_from_text(std::string_view text, const std::string& filename) {
  PlanSplit split(filename);
  const json dom = parse_json(text, filename, {&split});
  return plan_from_json(dom, filename, &split);
}

}  // namespace popkit::planner
