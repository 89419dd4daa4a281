#include "reports/run_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/output_file.h"
#include "planner/names.h"
#include "popkit/version.h"
#include "reports/json_reader.h"

namespace popkit::reports {

namespace {

using nlohmann::json;

constexpr std::array<planner::TensorClass, planner::kNumTensorClasses> kClasses{
    planner::TensorClass::kWeights,        planner::TensorClass::kGradAccumulators,
    planner::TensorClass::kOptimizerState, planner::TensorClass::kActivations,
    planner::TensorClass::kIoSlots,        planner::TensorClass::kWorkspace};

json memory_to_json(const Memory& m) {
  json by_class = json::object();
  for (const planner::TensorClass c : kClasses) {
    by_class[std::string(planner::tensor_class_name(c))] = m.by_class[static_cast<std::size_t>(c)];
  }
  json j = {
      {"always_live", m.always_live}, {"not_always_live", m.not_always_live}, {"peak", m.peak}};
  j["by_class"] = std::move(by_class);
  return j;
}

Memory memory_from_json(const JsonReader& r) {
  Memory m;
  m.always_live = r.bytes("always_live");
  m.not_always_live = r.bytes("not_always_live");
  m.peak = r.bytes("peak");
  const JsonReader by_class = r.object("by_class");
  for (const planner::TensorClass c : kClasses) {
    const std::string key(planner::tensor_class_name(c));
    // Run files from before the workspace class (issue 14 item 5) have no such key: 0.
    if (c == planner::TensorClass::kWorkspace && !by_class.has(key)) continue;
    m.by_class[static_cast<std::size_t>(c)] = by_class.bytes(key);
  }
  return m;
}

json seconds_to_json(const OpKindSeconds& s) {
  json j = {{"compute", s.compute},
            {"collective", s.collective},
            {"remote", s.remote},
            {"host_io", s.host_io}};
  if (s.pipeline > 0.0) j["pipeline"] = s.pipeline;
  return j;
}

OpKindSeconds seconds_from_json(const JsonReader& r) {
  return OpKindSeconds{r.non_negative("compute"), r.non_negative("collective"),
                       r.non_negative("remote"), r.non_negative("host_io"),
                       r.has("pipeline") ? r.non_negative("pipeline") : 0.0};
}

json bytes_to_json(const BytesMoved& b) {
  return {{"host", b.host}, {"remote", b.remote}, {"collective", b.collective}};
}

BytesMoved bytes_from_json(const JsonReader& r) {
  return BytesMoved{r.bytes("host"), r.bytes("remote"), r.bytes("collective")};
}

json plan_summary_to_json(const PlanSummary& p) {
  json j = {{"name", p.name},
            {"replication_factor", p.replication_factor},
            {"micro_batch_size", p.micro_batch_size},
            {"gradient_accumulation", p.gradient_accumulation},
            {"global_batch_size", p.global_batch_size},
            {"execution_mode", p.execution_mode},
            {"io_mode", p.io_mode},
            {"sharding_threshold", p.sharding_threshold},
            {"device_profile", p.device_profile},
            {"device_kind", p.device_kind},
            {"memory_per_replica", p.memory_per_replica},
            {"fits", p.fits},
            {"peak_bytes", p.peak_bytes},
            {"always_live_bytes", p.always_live_bytes},
            {"streaming_bytes", p.streaming_bytes},
            {"estimated_step_seconds", p.estimated_step_seconds},
            {"estimated_samples_per_second", p.estimated_samples_per_second}};
  // Only from a profile that measured it: other run files read and write back unchanged.
  if (p.device_core_round_trip_seconds > 0)
    j["device_core_round_trip_seconds"] = p.device_core_round_trip_seconds;
  if (p.device_cache_probe_seconds > 0)
    j["device_cache_probe_seconds"] = p.device_cache_probe_seconds;
  return j;
}

PlanSummary plan_summary_from_json(const JsonReader& r) {
  PlanSummary p;
  p.name = r.string("name");
  p.replication_factor = r.integer("replication_factor");
  p.micro_batch_size = r.integer("micro_batch_size");
  p.gradient_accumulation = r.integer("gradient_accumulation");
  p.global_batch_size = r.integer("global_batch_size");
  p.execution_mode = r.string("execution_mode");
  p.io_mode = r.string("io_mode");
  p.sharding_threshold = r.integer("sharding_threshold");
  p.device_profile = r.string("device_profile");
  p.device_kind = r.has("device_kind")        ? r.string("device_kind")
                  : p.device_profile == "cpu" ? "cpu"
                                              : "ipu";
  p.memory_per_replica = r.bytes("memory_per_replica");
  p.fits = r.boolean("fits");
  p.peak_bytes = r.bytes("peak_bytes");
  p.always_live_bytes = r.bytes("always_live_bytes");
  p.streaming_bytes = r.bytes("streaming_bytes");
  p.estimated_step_seconds = r.non_negative("estimated_step_seconds");
  p.estimated_samples_per_second = r.non_negative("estimated_samples_per_second");
  if (r.has("device_core_round_trip_seconds"))
    p.device_core_round_trip_seconds = r.non_negative("device_core_round_trip_seconds");
  if (r.has("device_cache_probe_seconds"))
    p.device_cache_probe_seconds = r.non_negative("device_cache_probe_seconds");
  return p;
}

void add_op_bytes(const std::vector<planner::Op>& ops, BytesMoved& b) {
  // A repeat's cost already covers its body times its steps: count it once.
  for (const planner::Op& op : ops) {
    b.host += op.host_bytes;
    b.remote += op.remote_bytes;
    b.collective += op.collective_bytes;
  }
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::size_t start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown";
}

std::string compiler_name() {
#if defined(__clang__)
  return fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

}  // namespace

Memory memory_from_phase(const planner::PhaseMemory& m) {
  return Memory{m.always_live, m.not_always_live, m.peak, m.peak_by_class};
}

PlanSummary plan_summary(const planner::Plan& plan) {
  PlanSummary p;
  p.name = plan.name;
  p.replication_factor = plan.replication_factor;
  p.micro_batch_size = plan.micro_batch_size;
  p.gradient_accumulation = plan.gradient_accumulation;
  p.global_batch_size = plan.global_batch_size;
  p.execution_mode = std::string(enum_name(plan.mode));
  p.io_mode = std::string(enum_name(plan.io_mode));
  p.sharding_threshold = plan.sharding_threshold;
  p.device_profile = plan.device_profile;
  p.device_kind = plan.device_kind;
  p.device_core_round_trip_seconds = plan.device_core_round_trip_seconds;
  p.device_cache_probe_seconds = plan.device_cache_probe_seconds;
  p.memory_per_replica = plan.memory_per_replica;
  p.fits = plan.fits;
  p.peak_bytes = plan.peak_bytes;
  p.always_live_bytes = plan.always_live_bytes;
  p.streaming_bytes = plan.streaming_bytes;
  p.estimated_step_seconds = plan.estimated_step_seconds;
  p.estimated_samples_per_second = plan.estimated_samples_per_second;
  return p;
}

BytesMoved planned_bytes_moved(const planner::Plan& plan) {
  BytesMoved b;
  for (const planner::Phase& phase : plan.phases) add_op_bytes(phase.ops, b);
  return b;
}

namespace {

std::vector<PhaseRecord> planned_phases(const planner::Plan& plan) {
  std::vector<PhaseRecord> out;
  for (const planner::Phase& phase : plan.phases) {
    PhaseRecord p;
    p.name = phase.name;
    p.planned = memory_from_phase(phase.memory);
    p.planned_seconds = phase.estimated_seconds;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

EvalRecord eval_record_from_plan(const planner::Plan& plan) {
  EvalRecord e;
  e.micro_batch_size = plan.micro_batch_size;
  e.batch_size = plan.global_batch_size;
  e.peak_bytes = plan.peak_bytes;
  e.estimated_samples_per_second = plan.estimated_samples_per_second;
  e.phases = planned_phases(plan);
  return e;
}

RunRecord record_from_plan(const planner::Plan& plan) {
  RunRecord r;
  r.name = plan.name;
  r.plan = plan_summary(plan);
  r.phases = planned_phases(plan);
  r.streaming_planned = plan.streaming_bytes;
  r.bytes_planned = planned_bytes_moved(plan);
  return r;
}

Throughput throughput_from_steps(const std::vector<double>& step_seconds,
                                 std::int64_t global_batch_size, std::int64_t warmup_steps) {
  Throughput t;
  if (step_seconds.empty()) return t;
  const auto n = static_cast<std::int64_t>(step_seconds.size());
  t.warmup_steps = std::clamp<std::int64_t>(warmup_steps, 0, n - 1);
  std::vector<double> rates;
  for (std::int64_t i = t.warmup_steps; i < n; ++i) {
    rates.push_back(static_cast<double>(global_batch_size) /
                    step_seconds[static_cast<std::size_t>(i)]);
  }
  const auto [min, max] = std::minmax_element(rates.begin(), rates.end());
  t.min = *min;
  t.max = *max;
  t.median = median(std::move(rates));
  return t;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const std::size_t n = values.size();
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (n % 2 == 1) return *mid;
  return (*std::max_element(values.begin(), mid) + *mid) / 2.0;
}

Environment current_environment(std::int64_t n_threads) {
  Environment e;
  e.cpu_model = cpu_model();
  e.n_cores = static_cast<std::int64_t>(std::thread::hardware_concurrency());
  e.n_threads = n_threads;
  e.compiler = compiler_name();
  e.build_type = kBuildType;
  e.git_revision = kGitRevision;
  e.popkit_version = kVersion;
  return e;
}

namespace {

json phases_to_json(const std::vector<PhaseRecord>& records) {
  json phases = json::array();
  for (const PhaseRecord& p : records) {
    json measured = json::array();
    for (const Memory& m : p.measured) measured.push_back(memory_to_json(m));
    json phase = {{"name", p.name},
                  {"planned_memory", memory_to_json(p.planned)},
                  {"planned_seconds", p.planned_seconds},
                  {"measured_seconds", p.measured_seconds},
                  {"measured_seconds_by_kind", seconds_to_json(p.measured_by_kind)}};
    phase["measured_memory"] = std::move(measured);
    phases.push_back(std::move(phase));
  }
  return phases;
}

std::vector<PhaseRecord> phases_from_json(const JsonReader& top, RunSplit* split) {
  std::vector<PhaseRecord> out;
  for (const JsonReader& p : top.array("phases")) {
    PhaseRecord phase;
    phase.name = p.string("name");
    phase.planned = memory_from_json(p.object("planned_memory"));
    const nlohmann::json& measured = p.value("measured_memory");
    if (split != nullptr && planner::is_placeholder(measured)) {
      phase.measured = split->measured_memory().take(measured, p.field("measured_memory"));
    } else {
      for (const JsonReader& m : p.array("measured_memory")) {
        phase.measured.push_back(memory_from_json(m));
      }
    }
    phase.planned_seconds = p.non_negative("planned_seconds");
    phase.measured_seconds = p.non_negative("measured_seconds");
    phase.measured_by_kind = seconds_from_json(p.object("measured_seconds_by_kind"));
    out.push_back(std::move(phase));
  }
  return out;
}

json eval_to_json(const EvalRecord& e) {
  return {{"micro_batch_size", e.micro_batch_size},
          {"batch_size", e.batch_size},
          {"peak_bytes", e.peak_bytes},
          {"estimated_samples_per_second", e.estimated_samples_per_second},
          {"phases", phases_to_json(e.phases)},
          {"n_samples", e.n_samples},
          {"evaluations", e.evaluations},
          {"batches", e.batches},
          {"seconds", e.seconds},
          {"samples_per_second", e.samples_per_second}};
}

EvalRecord eval_from_json(const JsonReader& r, RunSplit* split) {
  EvalRecord e;
  e.micro_batch_size = r.integer("micro_batch_size");
  e.batch_size = r.integer("batch_size");
  e.peak_bytes = r.bytes("peak_bytes");
  e.estimated_samples_per_second = r.non_negative("estimated_samples_per_second");
  e.phases = phases_from_json(r, split);
  e.n_samples = r.integer("n_samples");
  e.evaluations = r.integer("evaluations");
  e.batches = r.integer("batches");
  e.seconds = r.non_negative("seconds");
  e.samples_per_second = r.non_negative("samples_per_second");
  return e;
}

}  // namespace

nlohmann::json run_record_to_json(const RunRecord& r) {
  json test = nullptr;
  if (r.test) {
    test = {
        {"accuracy", r.test->accuracy}, {"loss", r.test->loss}, {"n_samples", r.test->n_samples}};
  }
  json checkpoints = json::array();
  for (const CheckpointRecord& c : r.checkpoints) {
    checkpoints.push_back({{"path", c.path}, {"step", c.step}});
  }
  const Environment& e = r.environment;
  json out = {
      {"kind", "run"},
      {"version", r.version},
      {"name", r.name},
      {"config", r.config},
      {"plan", plan_summary_to_json(r.plan)},
      {"streaming_memory", {{"planned", r.streaming_planned}, {"measured", r.streaming_measured}}},
      {"step_seconds", r.step_seconds},
      {"loss", r.loss},
      {"throughput",
       {{"median", r.throughput.median},
        {"min", r.throughput.min},
        {"max", r.throughput.max},
        {"warmup_steps", r.throughput.warmup_steps}}},
      {"test", test},
      {"bytes_moved",
       {{"planned", bytes_to_json(r.bytes_planned)},
        {"measured", bytes_to_json(r.bytes_measured)}}},
      {"checkpoints", checkpoints},
      {"environment",
       {{"cpu_model", e.cpu_model},
        {"n_cores", e.n_cores},
        {"n_threads", e.n_threads},
        {"compiler", e.compiler},
        {"build_type", e.build_type},
        {"git_revision", e.git_revision},
        {"popkit_version", e.popkit_version}}}};
  // The phases hold R measurements each (20,480 objects at R 4096): moved in, where a
  // brace list would copy them twice, so a run stopped by a signal ends within a second.
  out["phases"] = phases_to_json(r.phases);
  // Run files from before kernels were recorded have none: written only when known, so
  // such a file reads and writes back unchanged.
  if (!e.kernels.empty()) out["environment"]["kernels"] = e.kernels;
  if (e.core_round_trip_start_seconds > 0 || e.core_round_trip_end_seconds > 0)
    out["environment"]["core_round_trip_seconds"] = {{"start", e.core_round_trip_start_seconds},
                                                     {"end", e.core_round_trip_end_seconds}};
  if (e.cache_probes.n > 0)
    out["environment"]["cache_probe_seconds"] = {{"start", e.cache_probes.start_seconds},
                                                 {"end", e.cache_probes.end_seconds},
                                                 {"min", e.cache_probes.min_seconds},
                                                 {"max", e.cache_probes.max_seconds},
                                                 {"probes", e.cache_probes.n}};
  if (r.eval) out["eval"] = eval_to_json(*r.eval);
  // Written only when some ran, so run files from before read and write back unchanged.
  if (!r.evaluations.empty()) {
    json evaluations = json::array();
    for (const Evaluation& ev : r.evaluations)
      evaluations.push_back({{"step", ev.step},
                             {"epoch", ev.epoch},
                             {"accuracy", ev.result.accuracy},
                             {"loss", ev.result.loss},
                             {"n_samples", ev.result.n_samples}});
    out["evaluations"] = evaluations;
  }
  // Written only when set, so run files from before run folders read and write back
  // unchanged.
  if (!r.run_dir.empty()) out["run_dir"] = r.run_dir;
  if (!r.command.empty()) out["command"] = r.command;
  if (!r.config_hash.empty()) out["config_hash"] = r.config_hash;
  if (r.first_step != 0) out["first_step"] = r.first_step;
  if (r.resumed_from)
    out["resumed_from"] = {
        {"run_dir", r.resumed_from->run_dir},
        {"run_file",
         r.resumed_from->run_file.empty() ? json(nullptr) : json(r.resumed_from->run_file)},
        {"checkpoint", r.resumed_from->checkpoint},
        {"step", r.resumed_from->step}};
  if (r.pipeline)
    out["pipeline"] = {{"stages", r.pipeline->stages},
                       {"planned_bubble", r.pipeline->planned_bubble},
                       {"estimated_bubble", r.pipeline->estimated_bubble},
                       {"measured_bubble", r.pipeline->measured_bubble}};
  if (r.processes)
    out["processes"] = {{"ranks", r.processes->ranks},
                        {"mpi", r.processes->mpi},
                        {"replica_ranks", r.processes->replica_ranks},
                        {"cross_process_bytes", r.processes->cross_process_bytes}};
  return out;
}

std::optional<std::uint64_t> RunSplit::begin_array(const planner::JsonPath& path) {
  if (path.matches({"phases", "[]", "measured_memory"}) ||
      path.matches({"eval", "phases", "[]", "measured_memory"}))
    return measured_memory_.begin(path);
  if (path.matches({"step_seconds"})) return step_seconds_.begin(path);
  if (path.matches({"loss"})) return loss_.begin(path);
  return std::nullopt;
}

void RunSplit::element(std::uint64_t array, std::size_t index, nlohmann::json&& value) {
  if (measured_memory_.owns(array)) {
    measured_memory_.add(array, index, value, [&](const json& e, const std::string& path) {
      return memory_from_json(JsonReader(e, filename_, path));
    });
    return;
  }
  // Each element as JsonReader's non_negatives and numbers read it, with their errors.
  const bool time = step_seconds_.owns(array);
  planner::SplitArrays<double>& numbers = time ? step_seconds_ : loss_;
  if (value.is_number() &&
      (!time || (value.get<double>() >= 0 && value.get<double>() <= planner::kMaxTimeOrRate))) {
    numbers.push(array, value.get<double>());
    return;
  }
  numbers.add(array, index, value, [&](const json& e, const std::string& path) {
    const JsonReader element(e, filename_, path);
    return time ? element.as_non_negative() : element.as_number();
  });
}

namespace {

// A top-level array of numbers: the split's, when it read the array, else from the DOM.
std::vector<double> split_or_read(const JsonReader& top, const std::string& key,
                                  planner::SplitArrays<double>* split,
                                  std::vector<double> (JsonReader::*read)(const std::string&)
                                      const) {
  const nlohmann::json& j = top.value(key);
  if (split != nullptr && planner::is_placeholder(j)) return split->take(j, top.field(key));
  return (top.*read)(key);
}

}  // namespace

RunRecord run_record_from_json(const nlohmann::json& json, const std::string& filename,
                               RunSplit* split) {
  const JsonReader top(json, filename);
  const std::string kind = top.string("kind");
  if (kind != "run") top.fail("kind", fmt::format("\"{}\" is not a run file (want \"run\")", kind));
  RunRecord r;
  const std::int64_t version = top.integer("version");
  if (version > kRunFileVersion) {
    top.fail("version", fmt::format("{} is newer than this build of popkit reads ({})", version,
                                    kRunFileVersion));
  }
  if (version < 1) top.fail("version", fmt::format("{} is not a run file version", version));
  r.version = static_cast<int>(version);
  r.name = top.string("name");
  r.config = top.value("config");
  r.plan = plan_summary_from_json(top.object("plan"));
  r.phases = phases_from_json(top, split);
  if (top.has("eval")) r.eval = eval_from_json(top.object("eval"), split);
  if (top.has("pipeline")) {
    const JsonReader p = top.object("pipeline");
    r.pipeline = PipelineRecord{p.integer("stages"), p.number("planned_bubble"),
                                p.number("estimated_bubble"), p.number("measured_bubble")};
  }
  if (top.has("processes")) {
    const JsonReader p = top.object("processes");
    Processes processes{p.integer("ranks"), p.string("mpi"), {}, p.bytes("cross_process_bytes")};
    for (const double k : p.numbers("replica_ranks"))
      processes.replica_ranks.push_back(static_cast<std::int64_t>(k));
    r.processes = std::move(processes);
  }
  const JsonReader streaming = top.object("streaming_memory");
  r.streaming_planned = streaming.bytes("planned");
  r.streaming_measured = streaming.bytes_list("measured");
  r.step_seconds = split_or_read(top, "step_seconds", split ? &split->step_seconds() : nullptr,
                                 &JsonReader::non_negatives);
  r.loss = split_or_read(top, "loss", split ? &split->loss() : nullptr, &JsonReader::numbers);
  if (top.has("run_dir")) r.run_dir = top.string("run_dir");
  if (top.has("command"))
    for (const JsonReader& arg : top.array("command")) {
      if (!arg.json().is_string()) top.fail("command", "holds a value that is not a string");
      r.command.push_back(arg.json().get<std::string>());
    }
  if (top.has("config_hash")) r.config_hash = top.string("config_hash");
  if (top.has("first_step")) {
    r.first_step = top.integer("first_step");
    if (r.first_step < 0) top.fail("first_step", fmt::format("{} is negative", r.first_step));
  }
  if (top.has("resumed_from")) {
    const JsonReader f = top.object("resumed_from");
    r.resumed_from = ResumedFrom{
        f.string("run_dir"), f.value("run_file").is_null() ? std::string() : f.string("run_file"),
        f.string("checkpoint"), f.integer("step")};
  }
  const JsonReader t = top.object("throughput");
  r.throughput = Throughput{t.non_negative("median"), t.non_negative("min"), t.non_negative("max"),
                            t.integer("warmup_steps")};
  if (!top.value("test").is_null()) {
    const JsonReader test = top.object("test");
    r.test = TestResult{test.number("accuracy"), test.number("loss"), test.integer("n_samples")};
  }
  if (top.has("evaluations"))
    for (const JsonReader& e : top.array("evaluations"))
      r.evaluations.push_back(
          Evaluation{e.integer("step"), e.integer("epoch"),
                     TestResult{e.number("accuracy"), e.number("loss"), e.integer("n_samples")}});
  const JsonReader bytes = top.object("bytes_moved");
  r.bytes_planned = bytes_from_json(bytes.object("planned"));
  r.bytes_measured = bytes_from_json(bytes.object("measured"));
  for (const JsonReader& c : top.array("checkpoints")) {
    r.checkpoints.push_back(CheckpointRecord{c.string("path"), c.integer("step")});
  }
  const JsonReader e = top.object("environment");
  r.environment = Environment{
      e.string("cpu_model"),      e.integer("n_cores"),
      e.integer("n_threads"),     e.string("compiler"),
      e.string("build_type"),     e.string("git_revision"),
      e.string("popkit_version"), e.has("kernels") ? e.string("kernels") : std::string()};
  if (e.has("core_round_trip_seconds")) {
    const JsonReader trip = e.object("core_round_trip_seconds");
    r.environment.core_round_trip_start_seconds = trip.non_negative("start");
    r.environment.core_round_trip_end_seconds = trip.non_negative("end");
  }
  if (e.has("cache_probe_seconds")) {
    const JsonReader probe = e.object("cache_probe_seconds");
    reports::CacheProbes& c = r.environment.cache_probes;
    c.start_seconds = probe.non_negative("start");
    c.end_seconds = probe.non_negative("end");
    c.min_seconds = probe.non_negative("min");
    c.max_seconds = probe.non_negative("max");
    c.n = probe.integer("probes");
  }
  return r;
}

RunRecord run_record_from_text(std::string_view text, const std::string& filename) {
  RunSplit split(filename);
  const nlohmann::json dom = parse_input_json(text, filename, {&split});
  return run_record_from_json(dom, filename, &split);
}

void write_run_file(const RunRecord& record, const std::string& path) {
  // Paths need not be UTF-8 (a checkpoint's): such bytes are written as U+FFFD rather
  // than losing the run file.
  const std::string text =
      run_record_to_json(record).dump(2, ' ', false, json::error_handler_t::replace) + '\n';
  // A name of its own per process: two processes writing one path never share one.
  AtomicFile out(path, TemporaryName::kHiddenPerProcess);
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace popkit::reports
