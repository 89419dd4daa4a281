// Plan <-> JSON (schemas/plan.schema.json). Ops carry only the fields their kind uses;
// a field left out reads back as its default, so files stay small and round-trip.
#include "planner/plan_json.h"

#include <fmt/format.h>

#include "config/error.h"
#include "planner/memory.h"
#include "planner/names.h"

namespace popkit::planner {
namespace {

using nlohmann::json;

constexpr int kPlanVersion = 1;

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
  auto put = [&](const char* key, std::int64_t value) {
    if (value >= 0) j[key] = value;
  };
  put("tensor", op.tensor);
  put("src", op.src);
  put("dst", op.dst);
  put("buffer", op.buffer);
  put("entry", op.entry);
  put("row", op.row);
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
  put("in", op.in);
  put("pre", op.pre);
  put("out", op.out);
  put("labels", op.labels);
  put("dy", op.dy);
  put("dx", op.dx);
  put("weight", op.weight);
  put("bias", op.bias);
  put("grad_weight", op.grad_weight);
  put("grad_bias", op.grad_bias);
  put("grad", op.grad);
  put("adam_m", op.adam_m);
  put("adam_v", op.adam_v);
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
  return j;
}

json ops_json(const std::vector<Op>& ops) {
  json a = json::array();
  for (const Op& op : ops) a.push_back(op_json(op));
  return a;
}

// Reads with a path for every error: "<file>: phases[3].ops[2].kind: ...".
class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error("{}: {}: {}", file_, path, what);
  }

  const json& field(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) fail(path, "expected an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(join(path, key), "missing");
    return *it;
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string& path, std::size_t i) {
    return fmt::format("{}[{}]", path, i);
  }

  std::int64_t integer(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_number_integer())
      fail(join(path, key), fmt::format("expected an integer, got {}", v.dump()));
    return v.get<std::int64_t>();
  }
  std::int64_t integer_or(const json& obj, const std::string& path, const char* key,
                          std::int64_t fallback) const {
    return obj.contains(key) ? integer(obj, path, key) : fallback;
  }
  int small(const json& obj, const std::string& path, const char* key, int fallback) const {
    return static_cast<int>(obj.contains(key) ? integer(obj, path, key) : fallback);
  }
  std::uint64_t bytes(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
      fail(join(path, key), fmt::format("expected a non-negative integer, got {}", v.dump()));
    return v.get<std::uint64_t>();
  }
  double number(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_number()) fail(join(path, key), fmt::format("expected a number, got {}", v.dump()));
    return v.get<double>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_boolean())
      fail(join(path, key), fmt::format("expected true or false, got {}", v.dump()));
    return v.get<bool>();
  }
  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_string()) fail(join(path, key), fmt::format("expected a string, got {}", v.dump()));
    return v.get<std::string>();
  }
  template <typename E>
  E enumeration(const json& obj, const std::string& path, const char* key) const {
    const std::string s = string(obj, path, key);
    const auto e = parse_enum<E>(s);
    if (!e)
      fail(join(path, key),
           fmt::format("'{}' is not one of {}", s, fmt::join(enum_names<E>(), ", ")));
    return *e;
  }
  const json& array(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_array()) fail(join(path, key), "expected an array");
    return v;
  }
  std::vector<std::int64_t> shape(const json& obj, const std::string& path, const char* key) const {
    std::vector<std::int64_t> out;
    const json& a = array(obj, path, key);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number_integer()) fail(index(join(path, key), i), "expected an integer");
      out.push_back(a[i].get<std::int64_t>());
    }
    return out;
  }
  ReplicaGrouping grouping(const json& obj, const std::string& path, const char* key) const {
    const json& g = field(obj, path, key);
    const std::string p = join(path, key);
    return {integer(g, p, "factor"), integer(g, p, "group_size"), integer(g, p, "stride")};
  }

  Op op(const json& j, const std::string& path) const {
    Op o;
    o.kind = enumeration<OpKind>(j, path, "kind");
    if (j.contains("label")) o.label = string(j, path, "label");
    o.tensor = small(j, path, "tensor", -1);
    o.src = small(j, path, "src", -1);
    o.dst = small(j, path, "dst", -1);
    o.buffer = small(j, path, "buffer", -1);
    o.entry = integer_or(j, path, "entry", -1);
    o.row = integer_or(j, path, "row", -1);
    if (j.contains("stream")) o.stream = enumeration<Stream>(j, path, "stream");
    if (j.contains("grouping")) o.grouping = grouping(j, path, "grouping");
    if (j.contains("shard_grouping")) o.shard_grouping = grouping(j, path, "shard_grouping");
    if (j.contains("reduce")) o.reduce = enumeration<ReduceOp>(j, path, "reduce");
    o.layer = small(j, path, "layer", -1);
    o.variable = small(j, path, "variable", -1);
    o.in = small(j, path, "in", -1);
    o.pre = small(j, path, "pre", -1);
    o.out = small(j, path, "out", -1);
    o.labels = small(j, path, "labels", -1);
    o.dy = small(j, path, "dy", -1);
    o.dx = small(j, path, "dx", -1);
    o.weight = small(j, path, "weight", -1);
    o.bias = small(j, path, "bias", -1);
    o.grad_weight = small(j, path, "grad_weight", -1);
    o.grad_bias = small(j, path, "grad_bias", -1);
    o.grad = small(j, path, "grad", -1);
    o.adam_m = small(j, path, "adam_m", -1);
    o.adam_v = small(j, path, "adam_v", -1);
    if (o.kind == OpKind::kRepeat) {
      o.steps = integer(j, path, "steps");
      o.io_mode = enumeration<IoMode>(j, path, "io_mode");
      o.body = ops(j, path, "body");
    }
    if (j.contains("cost")) {
      const json& c = j["cost"];
      const std::string p = join(path, "cost");
      o.flops = bytes(c, p, "flops");
      o.host_bytes = bytes(c, p, "host_bytes");
      o.remote_bytes = bytes(c, p, "remote_bytes");
      o.collective_bytes = bytes(c, p, "collective_bytes");
    }
    return o;
  }

  std::vector<Op> ops(const json& obj, const std::string& path, const char* key) const {
    std::vector<Op> out;
    const json& a = array(obj, path, key);
    const std::string p = join(path, key);
    for (std::size_t i = 0; i < a.size(); ++i) out.push_back(op(a[i], index(p, i)));
    return out;
  }

 private:
  const std::string& file_;
};

}  // namespace

json optimizer_json(const config::Optimizer& o) {
  return {{"type", name_of(o.type)},
          {"lr", o.lr},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"bias_correction", o.bias_correction},
          {"first_order_dtype", name_of(o.first_order_dtype)}};
}

nlohmann::json plan_to_json(const Plan& plan) {
  json j;
  j["version"] = plan.version;
  j["name"] = plan.name;
  j["replication_factor"] = plan.replication_factor;
  j["micro_batch_size"] = plan.micro_batch_size;
  j["gradient_accumulation"] = plan.gradient_accumulation;
  j["global_batch_size"] = plan.global_batch_size;
  j["input_shape"] = plan.input_shape;
  j["n_classes"] = plan.n_classes;
  j["mode"] = name_of(plan.mode);
  j["io_mode"] = name_of(plan.io_mode);
  j["io_tiles"] = plan.io_tiles;
  j["variables_grouping"] = grouping_json(plan.variables_grouping);
  j["retrieval_mode"] = name_of(plan.retrieval_mode);
  j["sharding_grouping"] = grouping_json(plan.sharding_grouping);
  j["sharding_threshold"] = plan.sharding_threshold;
  j["optimizer"] = optimizer_json(plan.optimizer);
  json layers = json::array();
  for (const auto& l : plan.layers)
    layers.push_back({{"name", l.name},
                      {"in_features", l.in_features},
                      {"out_features", l.out_features},
                      {"activation", name_of(l.activation)},
                      {"graph", l.graph},
                      {"row", l.row}});
  j["layers"] = std::move(layers);
  json vars = json::array();
  for (const auto& v : plan.variables) {
    json jv = {{"name", v.name},          {"layer", v.layer},          {"role", name_of(v.role)},
               {"class", name_of(v.cls)}, {"dtype", name_of(v.dtype)}, {"meta_shape", v.meta_shape},
               {"nelms", v.nelms},        {"sharded", v.sharded},      {"shard_size", v.shard_size},
               {"padding", v.padding},    {"remote", v.remote}};
    if (v.remote) {
      jv["buffer"] = v.buffer;
      jv["entry"] = v.entry;
    } else {
      jv["device_tensor"] = v.device_tensor;
    }
    vars.push_back(std::move(jv));
  }
  j["variables"] = std::move(vars);
  json tensors = json::array();
  for (const auto& t : plan.tensors) {
    json jt = {{"name", t.name},
               {"class", name_of(t.cls)},
               {"dtype", name_of(t.dtype)},
               {"shape", t.shape},
               {"nelms", t.nelms},
               {"nbytes", t.nbytes},
               {"always_live", t.always_live}};
    if (t.double_buffer >= 0) jt["double_buffer"] = t.double_buffer;
    tensors.push_back(std::move(jt));
  }
  j["tensors"] = std::move(tensors);
  json buffers = json::array();
  for (const auto& b : plan.buffers)
    buffers.push_back({{"name", b.name},
                       {"class", name_of(b.cls)},
                       {"dtype", name_of(b.dtype)},
                       {"element_shape", b.element_shape},
                       {"rows", b.rows},
                       {"steps", b.steps},
                       {"entry_bytes", b.entry_bytes}});
  j["buffers"] = std::move(buffers);
  j["setup"] = ops_json(plan.setup);
  json phases = json::array();
  for (const auto& ph : plan.phases) {
    json by_class = json::object();
    for (std::size_t c = 0; c < kNumTensorClasses; ++c)
      by_class[name_of(static_cast<TensorClass>(c))] = ph.memory.peak_by_class[c];
    phases.push_back({{"name", ph.name},
                      {"ops", ops_json(ph.ops)},
                      {"memory",
                       {{"peak", ph.memory.peak},
                        {"always_live", ph.memory.always_live},
                        {"not_always_live", ph.memory.not_always_live},
                        {"peak_by_class", by_class}}},
                      {"estimated_seconds", ph.estimated_seconds}});
  }
  j["phases"] = std::move(phases);
  j["peak_bytes"] = plan.peak_bytes;
  j["peak_phase"] = plan.peak_phase;
  j["always_live_bytes"] = plan.always_live_bytes;
  j["streaming_bytes"] = plan.streaming_bytes;
  j["host_bytes_per_step"] = plan.host_bytes_per_step;
  j["memory_per_replica"] = plan.memory_per_replica;
  j["fits"] = plan.fits;
  if (!plan.fits)
    j["not_fitting"] = {{"phase", plan.not_fitting.phase},
                        {"bytes_over", plan.not_fitting.bytes_over},
                        {"largest", plan.not_fitting.largest},
                        {"suggestions", plan.not_fitting.suggestions}};
  j["device_profile"] = plan.device_profile;
  j["estimated_step_seconds"] = plan.estimated_step_seconds;
  j["estimated_samples_per_second"] = plan.estimated_samples_per_second;
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

Plan plan_from_json(const nlohmann::json& j, const std::string& filename) {
  const Reader r(filename);
  Plan p;
  if (!j.is_object()) r.fail("(top level)", "expected an object");
  p.version = static_cast<int>(r.integer(j, "", "version"));
  if (p.version > kPlanVersion)
    r.fail("version", fmt::format("plan format {} is newer than this build reads ({})", p.version,
                                  kPlanVersion));
  if (p.version < 1) r.fail("version", fmt::format("{} is not a plan format version", p.version));
  p.name = r.string(j, "", "name");
  p.replication_factor = r.integer(j, "", "replication_factor");
  p.micro_batch_size = r.integer(j, "", "micro_batch_size");
  p.gradient_accumulation = r.integer(j, "", "gradient_accumulation");
  p.global_batch_size = r.integer(j, "", "global_batch_size");
  p.input_shape = r.shape(j, "", "input_shape");
  p.n_classes = r.integer(j, "", "n_classes");
  p.mode = r.enumeration<config::ExecutionMode>(j, "", "mode");
  p.io_mode = r.enumeration<IoMode>(j, "", "io_mode");
  p.io_tiles = r.integer_or(j, "", "io_tiles", 0);
  p.variables_grouping = r.grouping(j, "", "variables_grouping");
  p.retrieval_mode = r.enumeration<RetrievalMode>(j, "", "retrieval_mode");
  p.sharding_grouping = r.grouping(j, "", "sharding_grouping");
  p.sharding_threshold = r.integer(j, "", "sharding_threshold");
  {
    const json& o = r.field(j, "", "optimizer");
    p.optimizer.type = r.enumeration<config::OptimizerType>(o, "optimizer", "type");
    p.optimizer.lr = r.number(o, "optimizer", "lr");
    p.optimizer.beta1 = r.number(o, "optimizer", "beta1");
    p.optimizer.beta2 = r.number(o, "optimizer", "beta2");
    p.optimizer.eps = r.number(o, "optimizer", "eps");
    p.optimizer.weight_decay = r.number(o, "optimizer", "weight_decay");
    p.optimizer.bias_correction = r.boolean(o, "optimizer", "bias_correction");
    p.optimizer.first_order_dtype = r.enumeration<DType>(o, "optimizer", "first_order_dtype");
  }
  const json& layers = r.array(j, "", "layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string path = Reader::index("layers", i);
    LayerInfo l;
    l.name = r.string(layers[i], path, "name");
    l.in_features = r.integer(layers[i], path, "in_features");
    l.out_features = r.integer(layers[i], path, "out_features");
    l.activation = r.enumeration<Activation>(layers[i], path, "activation");
    l.graph = r.small(layers[i], path, "graph", 0);
    l.row = r.small(layers[i], path, "row", 0);
    p.layers.push_back(l);
  }
  const json& vars = r.array(j, "", "variables");
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const std::string path = Reader::index("variables", i);
    const json& jv = vars[i];
    Variable v;
    v.name = r.string(jv, path, "name");
    v.layer = r.small(jv, path, "layer", 0);
    v.role = r.enumeration<VariableRole>(jv, path, "role");
    v.cls = r.enumeration<TensorClass>(jv, path, "class");
    v.dtype = r.enumeration<DType>(jv, path, "dtype");
    v.meta_shape = r.shape(jv, path, "meta_shape");
    v.nelms = r.integer(jv, path, "nelms");
    v.sharded = r.boolean(jv, path, "sharded");
    v.shard_size = r.integer(jv, path, "shard_size");
    v.padding = r.integer(jv, path, "padding");
    v.remote = r.boolean(jv, path, "remote");
    if (v.remote) {
      v.buffer = static_cast<int>(r.integer(jv, path, "buffer"));
      v.entry = r.integer(jv, path, "entry");
    } else {
      v.device_tensor = static_cast<int>(r.integer(jv, path, "device_tensor"));
    }
    p.variables.push_back(v);
  }
  const json& tensors = r.array(j, "", "tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string path = Reader::index("tensors", i);
    const json& jt = tensors[i];
    DeviceTensor t;
    t.name = r.string(jt, path, "name");
    t.cls = r.enumeration<TensorClass>(jt, path, "class");
    t.dtype = r.enumeration<DType>(jt, path, "dtype");
    t.shape = r.shape(jt, path, "shape");
    t.nelms = r.integer(jt, path, "nelms");
    t.nbytes = r.bytes(jt, path, "nbytes");
    t.always_live = r.boolean(jt, path, "always_live");
    t.double_buffer = r.small(jt, path, "double_buffer", -1);
    p.tensors.push_back(t);
  }
  const json& buffers = r.array(j, "", "buffers");
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::string path = Reader::index("buffers", i);
    const json& jb = buffers[i];
    RemoteBuffer b;
    b.name = r.string(jb, path, "name");
    b.cls = r.enumeration<TensorClass>(jb, path, "class");
    b.dtype = r.enumeration<DType>(jb, path, "dtype");
    b.element_shape = r.shape(jb, path, "element_shape");
    b.rows = r.integer(jb, path, "rows");
    b.steps = r.integer(jb, path, "steps");
    b.entry_bytes = r.bytes(jb, path, "entry_bytes");
    p.buffers.push_back(b);
  }
  p.setup = r.ops(j, "", "setup");
  const json& phases = r.array(j, "", "phases");
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const std::string path = Reader::index("phases", i);
    const json& jp = phases[i];
    Phase ph;
    ph.name = r.string(jp, path, "name");
    ph.ops = r.ops(jp, path, "ops");
    const json& m = r.field(jp, path, "memory");
    const std::string mp = Reader::join(path, "memory");
    ph.memory.peak = r.bytes(m, mp, "peak");
    ph.memory.always_live = r.bytes(m, mp, "always_live");
    ph.memory.not_always_live = r.bytes(m, mp, "not_always_live");
    const json& by = r.field(m, mp, "peak_by_class");
    for (std::size_t c = 0; c < kNumTensorClasses; ++c) {
      const std::string key = name_of(static_cast<TensorClass>(c));
      ph.memory.peak_by_class[c] = r.bytes(by, Reader::join(mp, "peak_by_class"), key.c_str());
    }
    ph.estimated_seconds = r.number(jp, path, "estimated_seconds");
    p.phases.push_back(std::move(ph));
  }
  p.peak_bytes = r.bytes(j, "", "peak_bytes");
  p.peak_phase = static_cast<int>(r.integer(j, "", "peak_phase"));
  p.always_live_bytes = r.bytes(j, "", "always_live_bytes");
  p.streaming_bytes = r.bytes(j, "", "streaming_bytes");
  p.host_bytes_per_step = r.bytes(j, "", "host_bytes_per_step");
  p.memory_per_replica = r.bytes(j, "", "memory_per_replica");
  p.fits = r.boolean(j, "", "fits");
  if (!p.fits) {
    const json& nf = r.field(j, "", "not_fitting");
    p.not_fitting.phase = r.string(nf, "not_fitting", "phase");
    p.not_fitting.bytes_over = r.bytes(nf, "not_fitting", "bytes_over");
    const json& largest = r.array(nf, "not_fitting", "largest");
    for (std::size_t i = 0; i < largest.size(); ++i) {
      if (!largest[i].is_string())
        r.fail(Reader::index("not_fitting.largest", i), "expected a string");
      p.not_fitting.largest.push_back(largest[i].get<std::string>());
    }
    const json& sugg = r.array(nf, "not_fitting", "suggestions");
    for (std::size_t i = 0; i < sugg.size(); ++i) {
      if (!sugg[i].is_string())
        r.fail(Reader::index("not_fitting.suggestions", i), "expected a string");
      p.not_fitting.suggestions.push_back(sugg[i].get<std::string>());
    }
  }
  p.device_profile = r.string(j, "", "device_profile");
  p.estimated_step_seconds = r.number(j, "", "estimated_step_seconds");
  p.estimated_samples_per_second = r.number(j, "", "estimated_samples_per_second");
  if (j.contains("host_memory")) {  // plans written before it was estimated lack it
    const json& h = r.field(j, "", "host_memory");
    p.host_memory.datasets = r.bytes(h, "host_memory", "datasets");
    p.host_memory.datasets_counted = r.boolean(h, "host_memory", "datasets_counted");
    p.host_memory.streaming = r.bytes(h, "host_memory", "streaming");
    p.host_memory.device = r.bytes(h, "host_memory", "device");
    p.host_memory.host_buffers = r.bytes(h, "host_memory", "host_buffers");
    p.host_memory.overhead = r.bytes(h, "host_memory", "overhead");
  }
  if (j.contains("warnings")) {
    const json& w = r.array(j, "", "warnings");
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (!w[i].is_string()) r.fail(Reader::index("warnings", i), "expected a string");
      p.warnings.push_back(w[i].get<std::string>());
    }
  }
  // The ops must reference tensors that exist and are live when used.
  try {
    check_plan(p);
  } catch (const Error& e) {
    throw Error("{}: {}", filename, e.what());
  }
  return p;
}

}  // namespace popkit::planner
