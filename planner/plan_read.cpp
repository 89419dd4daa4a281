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
constexpr int kPlanVersion = 5;

// Values quoted in an error message are cut to this many bytes, so a message stays a line.
constexpr std::size_t kMaxShown = 40;

std::string clipped(const std::string& s) {
  return s.size() <= kMaxShown ? s : s.substr(0, kMaxShown) + "...";
}

// A value as an error message shows it: scalars as JSON (a long string cut short),
// arrays and objects by their type only.
std::string shown(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_string() && v.get_ref<const std::string&>().size() > kMaxShown) {
    return json(v.get_ref<const std::string&>().substr(0, kMaxShown))
               .dump(-1, ' ', false, json::error_handler_t::replace) +
           "...";
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Reads with a path for every error: "<file>: phases[3].ops[2].kind: ...". With the
// split the DOM was parsed with, its arrays come from the split.
class Reader {
 public:
  explicit Reader(const std::string& file, PlanSplit::Arrays* split = nullptr)
      : file_(file), split_(split) {}

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
      fail(join(path, key), fmt::format("expected an integer, got {}", shown(v)));
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxInt64))
      fail(join(path, key), fmt::format("{} is out of range (at most {})", shown(v), kMaxInt64));
    return v.get<std::int64_t>();
  }
  // An integer from `lo` to `hi`.
  std::int64_t integer_in(const json& obj, const std::string& path, const char* key,
                          std::int64_t lo, std::int64_t hi) const {
    const std::int64_t v = integer(obj, path, key);
    if (v < lo || v > hi)
      fail(join(path, key), fmt::format("{} is out of range ({} to {})", v, lo, hi));
    return v;
  }
  int small(const json& obj, const std::string& path, const char* key) const {
    return static_cast<int>(integer_in(obj, path, key, kMinInt, kMaxInt));
  }
  int small_or(const json& obj, const std::string& path, const char* key, int fallback) const {
    return obj.contains(key) ? small(obj, path, key) : fallback;
  }
  std::uint64_t bytes(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
      fail(join(path, key), fmt::format("expected a non-negative integer, got {}", shown(v)));
    return v.get<std::uint64_t>();
  }
  double number(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_number()) fail(join(path, key), fmt::format("expected a number, got {}", shown(v)));
    return v.get<double>();
  }
  // Times, rates and fractions of time: a negative one is a broken file, not a report.
  double non_negative(const json& obj, const std::string& path, const char* key) const {
    const double v = number(obj, path, key);
    if (v < 0) fail(join(path, key), fmt::format("{} is negative; a time or a rate is >= 0", v));
    return v;
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_boolean())
      fail(join(path, key), fmt::format("expected true or false, got {}", shown(v)));
    return v.get<bool>();
  }
  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_string()) fail(join(path, key), fmt::format("expected a string, got {}", shown(v)));
    return v.get<std::string>();
  }
  // One of `names`.
  std::string name_in(const json& obj, const std::string& path, const char* key,
                      const std::vector<std::string_view>& names) const {
    std::string s = string(obj, path, key);
    if (std::find(names.begin(), names.end(), s) == names.end())
      fail(join(path, key),
           fmt::format("'{}' is not one of {}", clipped(s), fmt::join(names, ", ")));
    return s;
  }
  template <typename E>
  E enumeration(const json& obj, const std::string& path, const char* key) const {
    return *parse_enum<E>(name_in(obj, path, key, enum_names<E>()));
  }
  const json& array(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_array()) fail(join(path, key), "expected an array");
    return v;
  }
  std::vector<std::int64_t> shape(const json& obj, const std::string& path, const char* key) const {
    std::vector<std::int64_t> out;
    const json& a = array(obj, path, key);
    const std::string p = join(path, key);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number_integer()) fail(index(p, i), "expected an integer");
      if (a[i].is_number_unsigned() &&
          a[i].get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxInt64))
        fail(index(p, i), fmt::format("{} is out of range (at most {})", shown(a[i]), kMaxInt64));
      out.push_back(a[i].get<std::int64_t>());
    }
    return out;
  }
  // An op's operand list: tensor indices, -1 for an unused position; absent is empty.
  std::vector<int> operands(const json& obj, const std::string& path, const char* key) const {
    std::vector<int> out;
    if (!obj.contains(key)) return out;
    const json& a = array(obj, path, key);
    const std::string p = join(path, key);
    out.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number_integer())
        fail(index(p, i), fmt::format("expected a tensor index, got {}", shown(a[i])));
      const bool in_range =
          a[i].is_number_unsigned()
              ? a[i].get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxInt)
              : a[i].get<std::int64_t>() >= -1 && a[i].get<std::int64_t>() <= kMaxInt;
      if (!in_range)
        fail(index(p, i), fmt::format("{} is not a tensor index (-1 to {})", shown(a[i]), kMaxInt));
      out.push_back(a[i].get<int>());
    }
    return out;
  }
  std::vector<std::string> strings(const json& obj, const std::string& path,
                                   const char* key) const {
    std::vector<std::string> out;
    const json& a = array(obj, path, key);
    const std::string p = join(path, key);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string()) fail(index(p, i), "expected a string");
      out.push_back(a[i].get<std::string>());
    }
    return out;
  }
  ReplicaGrouping grouping(const json& obj, const std::string& path, const char* key) const {
    const json& g = field(obj, path, key);
    const std::string p = join(path, key);
    return {integer(g, p, "factor"), integer(g, p, "group_size"), integer(g, p, "stride")};
  }

  // The array at obj.key, each element read by `read`; from the split when it read it.
  template <typename T, typename Read>
  std::vector<T> list(const json& obj, const std::string& path, const char* key,
                      SplitArrays<T>* split, Read read) const {
    const json& v = field(obj, path, key);
    const std::string p = join(path, key);
    if (split != nullptr && is_placeholder(v)) return split->take(v, p);
    if (!v.is_array()) fail(p, "expected an array");
    std::vector<T> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(read(v[i], index(p, i)));
    return out;
  }

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
    if (j.contains("grads_add"))
      o.grads_add = static_cast<std::uint32_t>(integer_in(j, path, "grads_add", 0, kMaxInt));
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

  // A kind's keys (config/kind_keys.h), each as its type: every one the kind declares.
  config::Attributes attributes(const json& obj, const std::string& path,
                                std::span<const config::KindKey> keys) const {
    config::Attributes out;
    for (const config::KindKey& key : keys) {
      const std::string name(key.name);
      switch (key.type) {
        case config::KeyType::kInteger:
          out.set(name, integer(obj, path, name.c_str()));
          break;
        case config::KeyType::kNumber:
          out.set(name, number(obj, path, name.c_str()));
          break;
        case config::KeyType::kBoolean:
          out.set(name, boolean(obj, path, name.c_str()));
          break;
        case config::KeyType::kChoice:
          out.set(name, name_in(obj, path, name.c_str(), key.choices()));
          break;
        case config::KeyType::kName:
          out.set(name, string(obj, path, name.c_str()));
          break;
      }
    }
    return out;
  }

  Plan plan(const json& j) const;

 private:
  static constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t kMinInt = std::numeric_limits<int>::min();
  static constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

  const std::string& file_;
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
  {
    const json& o = field(j, "", "optimizer");
    p.optimizer.type = name_in(o, "optimizer", "type", config::optimizer_kind_names());
    // The common keys, then the kind's (config/optimizer_kinds.h), each as its type.
    p.optimizer.lr = number(o, "optimizer", "lr");
    p.optimizer.weight_decay = number(o, "optimizer", "weight_decay");
    p.optimizer.attributes =
        attributes(o, "optimizer", config::optimizer_kind_rules(p.optimizer.type).keys);
  }
  p.seed = bytes(j, "", "seed");
  p.init_seed = bytes(j, "", "init_seed");
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
  const json& phases = array(j, "", "phases");
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const std::string path = index("phases", i);
    const json& jp = phases[i];
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
    if (jp.contains("slots")) {
      const std::string sp = join(path, "slots");
      const json& slots = array(jp, path, "slots");
      for (std::size_t k = 0; k < slots.size(); ++k) {
        const std::string at = index(sp, k);
        StageSlot slot;
        const std::string work = string(slots[k], at, "work");
        if (work != "forward" && work != "backward")
          fail(join(at, "work"), fmt::format("expected forward or backward, got '{}'", work));
        slot.work = work == "forward" ? PipelineWork::kForward : PipelineWork::kBackward;
        slot.micro_batch = integer_in(slots[k], at, "micro_batch", 0, p.gradient_accumulation - 1);
        const auto n_ops = static_cast<std::int64_t>(ph.ops.size());
        slot.first_op = integer_in(slots[k], at, "first_op", 0, n_ops);
        slot.end_op = integer_in(slots[k], at, "end_op", slot.first_op, n_ops);
        ph.slots.push_back(slot);
      }
    }
    p.phases.push_back(std::move(ph));
  }
  if (j.contains("sync_pattern"))
    p.sync_pattern = enumeration<config::SyncPattern>(j, "", "sync_pattern");
  if (j.contains("pipeline")) {
    const json& jp = field(j, "", "pipeline");
    PipelinePlan pp;
    pp.placement_auto = string(jp, "pipeline", "placement") == "auto";
    pp.planned_bubble = non_negative(jp, "pipeline", "planned_bubble");
    pp.estimated_bubble = non_negative(jp, "pipeline", "estimated_bubble");
    const json& stages = array(jp, "pipeline", "stages");
    const auto n_layers = static_cast<std::int64_t>(p.layers.size());
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
    p.pipeline = std::move(pp);
  }
  p.peak_bytes = bytes(j, "", "peak_bytes");
  p.peak_phase = small(j, "", "peak_phase");
  p.always_live_bytes = bytes(j, "", "always_live_bytes");
  p.streaming_bytes = bytes(j, "", "streaming_bytes");
  p.host_bytes_per_step = bytes(j, "", "host_bytes_per_step");
  p.memory_per_replica = bytes(j, "", "memory_per_replica");
  p.fits = boolean(j, "", "fits");
  if (!p.fits) {
    const json& nf = field(j, "", "not_fitting");
    p.not_fitting.phase = string(nf, "not_fitting", "phase");
    p.not_fitting.bytes_over = bytes(nf, "not_fitting", "bytes_over");
    p.not_fitting.largest = strings(nf, "not_fitting", "largest");
    p.not_fitting.suggestions = strings(nf, "not_fitting", "suggestions");
    if (nf.contains("advice")) {  // only popplan plan asks the tuner
      const json& ja = field(nf, "not_fitting", "advice");
      const std::string at = "not_fitting.advice";
      FitAdvice a;
      a.fits = boolean(ja, at, "fits");
      a.settings = strings(ja, at, "settings");
      a.peak_bytes = bytes(ja, at, "peak_bytes");
      a.samples_per_second = non_negative(ja, at, "samples_per_second");
      a.n_planned = bytes(ja, at, "planned");
      p.not_fitting.advice = std::move(a);
    }
  }
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
  if (j.contains("warnings")) p.warnings = strings(j, "", "warnings");
  // The ops must reference tensors that exist and are live when used.
  try {
    check_plan(p);
  } catch (const Error& e) {
    throw Error("{}: {}", file_, e.what());
  }
  return p;
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
