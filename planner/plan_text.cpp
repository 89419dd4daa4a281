// The text printout of a plan and of replica groupings.
#include "planner/plan_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>
#include <utility>

#include "base/units.h"
#include "planner/host_memory.h"
#include "planner/names.h"
#include "planner/operands.h"
#include "planner/sync_groups.h"
#include "planner/text_table.h"

namespace popkit::planner {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string grouping_text(const ReplicaGrouping& g) {
  return fmt::format("group_size {}, stride {} ({} group{})", g.group_size, g.stride, g.n_groups(),
                     g.n_groups() == 1 ? "" : "s");
}

const std::string& tensor_name(const Plan& plan, int t) {
  static const std::string kNone = "-";
  return t >= 0 && static_cast<std::size_t>(t) < plan.tensors.size()
             ? plan.tensors[static_cast<std::size_t>(t)].name
             : kNone;
}

// "label: in a, weight b, bias c -> out d, pre e": the operands by their positions'
// names, unused positions left out.
void operands_text(std::string& line, const Plan& plan, const Op& op) {
  const OpSignature sig = op_signature(op, plan);
  auto list = [&](const std::vector<int>& ts, std::span<const Operand> names) {
    std::string text;
    for (std::size_t i = 0; i < ts.size() && i < names.size(); ++i) {
      if (ts[i] < 0) continue;
      if (!text.empty()) text += ", ";
      text += fmt::format("{} {}", names[i].name, tensor_name(plan, ts[i]));
    }
    return text;
  };
  const std::string outputs = list(op.outputs, sig.outputs);
  const std::string state = list(op.state, sig.state);
  fmt::format_to(std::back_inserter(line), "{}: {}{}{}{}{}", op.label, list(op.inputs, sig.inputs),
                 outputs.empty() ? "" : " -> ", outputs, state.empty() ? "" : "; updates ", state);
}

// What an op's line says after its kind: the label, and what the kind shows.
void op_text(std::string& line, const Plan& plan, const Op& op) {
  auto to = std::back_inserter(line);
  switch (op.kind) {
    case OpKind::kAllGather:
    case OpKind::kSliceShard:
    case OpKind::kAllReduce:
      fmt::format_to(to, "{}  [{}]", op.label, grouping_text(op.grouping));
      return;
    case OpKind::kReduceScatter:
      fmt::format_to(to, "{}  [{}; shards {}]", op.label, grouping_text(op.grouping),
                     grouping_text(op.shard_grouping));
      return;
    case OpKind::kForward:
    case OpKind::kLoss:
    case OpKind::kBackward:
    case OpKind::kOptimizerStep:
      return operands_text(line, plan, op);
    default:
      line += op.label;
  }
}

// One op a line: the kind in 15 columns, then op_text, wrapped under itself past `width`.
void print_ops(Printer& out, const Plan& plan, const std::vector<Op>& ops,
               const std::string& indent, std::size_t width) {
  std::string line;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kRepeat) {
      out.print("{}repeat {} x ({}) {{\n", indent, op.steps, enum_name(op.io_mode));
      print_ops(out, plan, op.body, indent + "  ", width);
      out.put(indent);
      out.put("}\n");
      continue;
    }
    line.clear();
    op_text(line, plan, op);
    constexpr std::size_t kKind = 15;
    if (width == 0 || indent.size() + kKind + 1 + line.size() <= width) {
      out.put(indent);
      out.aligned(op_kind_name(op.kind), kKind, false);
      out.put(' ');
      out.put(line);
      out.put('\n');
    } else {
      print_wrapped(out, fmt::format("{}{:<{}} ", indent, op_kind_name(op.kind), kKind),
                    std::string(indent.size() + kKind + 3, ' '), line, width);
    }
  }
}

// A pipelined stage's program, shortened: its head, the order of its slots, the ops of
// its first forward and first backward slot (the others differ only in the micro-batch
// and the stash slot they use), and its tail.
void print_stage_program(Printer& out, const Plan& plan, const Phase& ph, std::size_t width) {
  const std::string indent = "    ";
  if (ph.slots.empty()) return print_ops(out, plan, ph.ops, indent, width);
  auto range = [&](std::int64_t first, std::int64_t end) {
    return std::vector<Op>(ph.ops.begin() + first, ph.ops.begin() + end);
  };
  print_ops(out, plan, range(0, ph.slots.front().first_op), indent, width);
  std::string order;
  for (const StageSlot& slot : ph.slots)
    order += fmt::format("{}{}{}", order.empty() ? "" : " ",
                         slot.work == PipelineWork::kForward ? 'F' : 'B', slot.micro_batch);
  out.print("{}slots (1F1B, by micro-batch): {}\n", indent, order);
  for (const PipelineWork work : {PipelineWork::kForward, PipelineWork::kBackward}) {
    const auto slot = std::find_if(ph.slots.begin(), ph.slots.end(),
                                   [&](const StageSlot& s) { return s.work == work; });
    if (slot == ph.slots.end()) continue;
    out.print("{}{} slot, micro-batch {} {{\n", indent,
              work == PipelineWork::kForward ? "forward" : "backward", slot->micro_batch);
    print_ops(out, plan, range(slot->first_op, slot->end_op), indent + "  ", width);
    out.print("{}}}\n", indent);
  }
  print_ops(out, plan, range(ph.slots.back().end_op, static_cast<std::int64_t>(ph.ops.size())),
            indent, width);
}

// Under full the devices meet at every cycle (planner/sync_groups.h).
bool in_lockstep(const Plan& plan) {
  return plan.sync_pattern == config::SyncPattern::kFull &&
         plan.replication_factor * static_cast<std::int64_t>(plan.pipeline->stages.size()) > 1;
}

// The schedule in time units for the diagram: in lockstep the cycles, a unit each;
// otherwise each stage's forward and backward slot in multiples of a unit (at least 1),
// the shortest slot made coarser until the step fits 48 columns or every slot is one
// unit.
PipelineSchedule diagram_schedule(const Plan& plan) {
  const PipelinePlan& pp = *plan.pipeline;
  if (in_lockstep(plan)) {
    const std::vector<std::int64_t> one(pp.stages.size(), 1);
    return one_f_one_b(plan.gradient_accumulation, one, one);
  }
  double unit = 0.0;
  for (const PipelineStagePlan& st : pp.stages)
    for (const double t : {st.forward_seconds, st.backward_seconds})
      if (t > 0 && (unit == 0.0 || t < unit)) unit = t;
  if (unit == 0.0) unit = 1.0;
  for (;; unit *= 1.5) {
    std::vector<std::int64_t> f, b;
    for (const PipelineStagePlan& st : pp.stages) {
      f.push_back(std::max<std::int64_t>(1, std::llround(st.forward_seconds / unit)));
      b.push_back(std::max<std::int64_t>(1, std::llround(st.backward_seconds / unit)));
    }
    PipelineSchedule s = one_f_one_b(plan.gradient_accumulation, f, b);
    const bool all_one = std::all_of(f.begin(), f.end(), [](std::int64_t x) { return x == 1; }) &&
                         std::all_of(b.begin(), b.end(), [](std::int64_t x) { return x == 1; });
    if (s.makespan <= 48 || all_one) return s;
  }
}

void print_pipeline(Printer& out, const Plan& plan) {
  const PipelinePlan& pp = *plan.pipeline;
  const auto S = static_cast<std::int64_t>(pp.stages.size());
  const bool train = plan.program == Program::kTrain;
  out.print("\nPipeline: {} stages, {};\n  {}\n", S,
            pp.placement_auto ? "placement auto: balanced by forward + backward FLOPs"
                              : "placement as written",
            train ? "1F1B with a flush before the optimizer" : "forwards only, in order");
  TextTable t({"Stage", "Layers", "Stash depth", "Peak", "Forward slot", "Backward slot"},
              {true, false, true, true, true, true});
  for (std::int64_t s = 0; s < S; ++s) {
    const PipelineStagePlan& st = pp.stages[static_cast<std::size_t>(s)];
    std::string layers;
    for (int k = st.first_layer; k < st.first_layer + st.n_layers; ++k)
      layers += (layers.empty() ? "" : " ") + plan.layers[static_cast<std::size_t>(k)].name;
    const Phase* ph = nullptr;
    for (const Phase& p : plan.phases)
      if (p.stage == s) ph = &p;
    t.add({std::to_string(s), layers, std::to_string(st.stash_depth),
           ph ? format_bytes(ph->memory.peak) : "-", format_seconds(st.forward_seconds),
           train ? format_seconds(st.backward_seconds) : "-"});
  }
  t.print(out);
  out.print(
      "  bubble: planned {:.1f}% ((S-1)/(GA+S-1) = {}/{}), {:.1f}% with the stages' "
      "estimated times\n",
      pp.planned_bubble * 100, S - 1, plan.gradient_accumulation + S - 1,
      pp.estimated_bubble * 100);
  if (!train) return;
  out.put(in_lockstep(plan) ? "  schedule (cycle x stage, every device in lockstep under full;\n"
                              "  Fi/Bi: forward/backward of micro-batch i, . idle):\n"
                            : "  schedule (time x stage; Fi/Bi: forward/backward of micro-batch "
                              "i, . idle):\n");
  const std::string diagram = schedule_diagram(diagram_schedule(plan));
  std::size_t at = 0;
  while (at < diagram.size()) {
    const std::size_t end = diagram.find('\n', at);
    out.print("    {}\n", diagram.substr(at, end == std::string::npos ? end : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
}

void print_sync_groups(Printer& out, const Plan& plan) {
  const std::int64_t S =
      plan.pipeline ? static_cast<std::int64_t>(plan.pipeline->stages.size()) : 1;
  const SyncGroups g = sync_groups(plan.sync_pattern, plan.replication_factor, S);
  std::string gs2;
  for (const auto& set : g.gs2) gs2 += (gs2.empty() ? "" : " ") + device_set_text(set);
  if (g.gs2.size() > 4) gs2 = fmt::format("{} groups of one device each", g.gs2.size());
  out.print("  sync pattern {}: GS1 {}\n    GS2 {}\n", enum_name(plan.sync_pattern),
            device_set_text(g.gs1.front()), gs2);
}

std::string placement(const Plan& plan, const Variable& v) {
  if (!v.remote) return "device " + tensor_name(plan, v.device_tensor);
  const RemoteBuffer& b = plan.buffers[static_cast<std::size_t>(v.buffer)];
  return fmt::format("remote {}[{}]", b.name, v.entry);
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kUnits[u]);
}

void print_grouping(std::ostream& out, const ReplicaGrouping& g) {
  TextTable t({"Group", "Replicas"}, {true, false});
  for (std::int64_t group = 0; group < g.n_groups(); ++group)
    t.add({std::to_string(group), fmt::format("{}", fmt::join(g.members(group), ", "))});
  t.print(out, "");
}

nlohmann::json grouping_to_json(const ReplicaGrouping& g) {
  nlohmann::json groups = nlohmann::json::array();
  for (std::int64_t group = 0; group < g.n_groups(); ++group) groups.push_back(g.members(group));
  return {{"factor", g.factor},
          {"group_size", g.group_size},
          {"stride", g.stride},
          {"n_groups", g.n_groups()},
          {"groups", groups}};
}

namespace {

// The verdict, the peak, the estimate and the fit advice: what a plan is asked for.
void print_verdict(Printer& out, const Plan& plan) {
  const Phase& peak = plan.phases[static_cast<std::size_t>(plan.peak_phase)];
  out.print("{} {}: {}, peak {} of {} per replica\n",
            plan.program == Program::kEval ? "Evaluation plan" : "Plan",
            plan.name.empty() ? "(unnamed)" : plan.name, plan.fits ? "fits" : "does not fit",
            format_bytes(plan.peak_bytes), format_bytes(plan.memory_per_replica));
  out.print("  the peak in phase {}: {}\n", plan.peak_phase + 1, peak.name);
  const char* per = plan.program == Program::kEval ? "batch" : "step";
  out.print("  estimated {} per {}, {} samples/s on {}\n",
            format_seconds(plan.estimated_step_seconds), per,
            format_rate(plan.estimated_samples_per_second), plan.device_profile);
  if (!plan.fits) {
    const NotFitting& nf = plan.not_fitting;
    out.print("  phase '{}' needs {} more than the {} per replica\n", nf.phase,
              format_bytes(nf.bytes_over), format_bytes(plan.memory_per_replica));
    print_wrapped(out, "  largest live tensors at the peak: ", "    ", nf.largest);
    for (const auto& s : nf.suggestions) print_wrapped(out, "  ", "    ", s);
  }
  for (const auto& w : plan.warnings) print_wrapped(out, "  warning: ", "    ", w);
}

// The model's parameters: its weights and biases, each variable once (a tied head shares
// its embedding's), as a model's size is published; optimizer state aside.
void print_parameters(Printer& out, const Plan& plan) {
  std::int64_t n = 0, tensors = 0;
  for (const Variable& v : plan.variables)
    if (v.role != VariableRole::kOptimizerState) {
      n += v.nelms;
      ++tensors;
    }
  out.print("  model parameters {} in {} tensors\n", format_thousands(static_cast<double>(n)),
            tensors);
}

void print_setup(Printer& out, const Plan& plan) {
  out.print("\nConfiguration (plan format {})\n", plan.version);
  print_parameters(out, plan);
  out.print("  replicas {}, micro-batch {}, gradient accumulation {}, global batch {}\n",
            plan.replication_factor, plan.micro_batch_size, plan.gradient_accumulation,
            plan.global_batch_size);
  out.print("  mode {}, io_mode {}, device {} ({} per replica)\n", enum_name(plan.mode),
            enum_name(plan.io_mode), plan.device_profile, format_bytes(plan.memory_per_replica));
  out.print("  variables: {}, retrieval {}\n", grouping_text(plan.variables_grouping),
            enum_name(plan.retrieval_mode));
  if (plan.sharding_threshold > 0)
    out.print("  sharding: nelms >= {} over {}\n", plan.sharding_threshold,
              grouping_text(plan.sharding_grouping));
  else
    out.put("  sharding: off\n");
  if (plan.pipeline)
    out.print("  pipeline: {} stages, {} devices (replica r's stage s is device r x {} + s)\n",
              plan.pipeline->stages.size(),
              plan.replication_factor * static_cast<std::int64_t>(plan.pipeline->stages.size()),
              plan.pipeline->stages.size());
  print_sync_groups(out, plan);
}

// Returns whether a table folded rows.
bool print_variables(Printer& out, const Plan& plan, std::size_t width) {
  out.put("\nLayers\n");
  // The kind's keys but the output's width, which has a column of its own.
  TextTable layers({"Layer", "Kind", "In", "Out", "Settings", "Graph", "Row"},
                   {false, false, true, true, false, true, true});
  layers.fold_repeats();
  for (const auto& l : plan.layers) {
    std::vector<std::string> settings;
    for (const config::Attribute& a : l.attributes.items())
      if (a.key != "out_features")
        settings.push_back(fmt::format("{} {}", a.key, config::attribute_text(a.value)));
    layers.add({l.name, l.kind, std::to_string(l.in_features), std::to_string(l.out_features),
                fmt::format("{}", fmt::join(settings, ", ")), std::to_string(l.graph),
                std::to_string(l.row)});
  }
  bool folded = layers.print(out, "  ", width);

  out.put("\nRemote buffers (per replica)\n");
  TextTable buffers({"Buffer", "Class", "Dtype", "Element shape", "Rows x steps", "Entries",
                     "Entry bytes", "Bytes"},
                    {false, false, false, false, true, true, true, true}, 1,
                    {false, false, false, false, false, true, true, false});
  buffers.fold_repeats();
  for (const auto& b : plan.buffers)
    buffers.add({b.name, std::string(tensor_class_name(b.cls)), std::string(enum_name(b.dtype)),
                 shape_text(b.element_shape), fmt::format("{} x {}", b.rows, b.steps),
                 std::to_string(b.entries()), std::to_string(b.entry_bytes),
                 format_bytes(b.nbytes())});
  folded = buffers.print(out, "  ", width) || folded;

  out.put("\nTensors (variables)\n");
  TextTable vars({"Name", "Shape", "Elements", "Dtype", "Class", "Placement", "Sharded",
                  "Shard size", "Padding"},
                 {false, false, true, false, false, false, false, true, true}, 1,
                 {false, false, true, true, true, false, false, false, true});
  vars.fold_repeats();
  for (const auto& v : plan.variables)
    vars.add({v.name, shape_text(v.meta_shape), std::to_string(v.nelms),
              std::string(enum_name(v.dtype)), std::string(tensor_class_name(v.cls)),
              placement(plan, v), v.sharded ? "yes" : "no", std::to_string(v.shard_size),
              std::to_string(v.padding)});
  return vars.print(out, "  ", width) || folded;
}

// The device tensors and the schedule's ops: the listing --ops asks for.
void print_ops_listing(Printer& out, const Plan& plan, std::size_t width) {
  if (plan.pipeline) {
    out.put("\nDevice tensors (per replica, on its stage's device)\n");
    TextTable tensors(
        {"Stage", "Name", "Shape", "Elements", "Dtype", "Class", "Bytes", "Always live"},
        {true, false, false, true, false, false, true, false}, 2);
    for (const auto& t : plan.tensors)
      tensors.add({std::to_string(t.stage), t.name, shape_text(t.shape), std::to_string(t.nelms),
                   std::string(enum_name(t.dtype)), std::string(tensor_class_name(t.cls)),
                   std::to_string(t.nbytes), t.always_live ? "yes" : "no"});
    tensors.print(out, "  ", width);
  } else {
    out.put("\nDevice tensors (per replica)\n");
    TextTable tensors(
        {"Name", "Shape", "Elements", "Dtype", "Class", "Bytes", "Always live", "Second slot"},
        {false, false, true, false, false, true, false, false});
    for (const auto& t : plan.tensors)
      tensors.add({t.name, shape_text(t.shape), std::to_string(t.nelms),
                   std::string(enum_name(t.dtype)), std::string(tensor_class_name(t.cls)),
                   std::to_string(t.nbytes), t.always_live ? "yes" : "no",
                   t.double_buffer >= 0 ? tensor_name(plan, t.double_buffer) : "-"});
    tensors.print(out, "  ", width);
  }

  out.put(plan.program == Program::kEval ? "\nSchedule (per evaluation batch)\n"
                                         : "\nSchedule (per optimizer step)\n");
  out.put("  setup (once):\n");
  print_ops(out, plan, plan.setup, "    ", width);
  for (std::size_t p = 0; p < plan.phases.size(); ++p) {
    out.print("  phase {}: {}\n", p + 1, plan.phases[p].name);
    if (plan.pipeline)
      print_stage_program(out, plan, plan.phases[p], width);
    else
      print_ops(out, plan, plan.phases[p].ops, "    ", width);
  }
}

// Returns whether a table folded rows.
bool print_memory(Printer& out, const Plan& plan, std::size_t width) {
  out.put(plan.pipeline ? "\nMemory per device (each phase a stage's device)\n"
                        : "\nMemory per replica\n");
  TextTable mem({"Phase", "Peak", "Always live", "Not always live", "Est. time"},
                {false, true, true, true, true});
  TextTable by_class(
      {"Phase", "Weights", "Grad acc", "Optimizer", "Activations", "IO slots", "Workspace"},
      {true, true, true, true, true, true, true});
  mem.fold_repeats();
  by_class.fold_repeats();
  for (std::size_t p = 0; p < plan.phases.size(); ++p) {
    const Phase& ph = plan.phases[p];
    mem.add({fmt::format("{}: {}", p + 1, ph.name), format_bytes(ph.memory.peak),
             format_bytes(ph.memory.always_live), format_bytes(ph.memory.not_always_live),
             format_seconds(ph.estimated_seconds)});
    std::vector<std::string> row{std::to_string(p + 1)};
    for (auto b : ph.memory.peak_by_class) row.push_back(format_bytes(b));
    by_class.add(std::move(row));
  }
  bool folded = mem.print(out, "  ", width);
  out.put("\n  At each phase's peak, by class:\n");
  folded = by_class.print(out, "  ", width) || folded;
  out.print("  program peak {} (phase {}), always live {}, device {}\n",
            format_bytes(plan.peak_bytes), plan.peak_phase + 1,
            format_bytes(plan.always_live_bytes), format_bytes(plan.memory_per_replica));
  out.print("  streaming memory {}, host transfers {} per step\n",
            format_bytes(plan.streaming_bytes), format_bytes(plan.host_bytes_per_step));
  out.print("  host memory of poprun on a CPU {}{}:\n", format_bytes(plan.host_memory.total()),
            plan.host_memory.datasets_counted ? "" : " + the datasets");
  print_wrapped(out, "    ", "    ", host_memory_parts(plan.host_memory));
  if (!plan.network) return folded;
  const NetworkEstimate& n = *plan.network;
  const char* per = plan.program == Program::kEval ? "batch" : "step";
  out.print("  network: {} host{} x {} replica{}, {:g} Gb/s links, {:g} us per message\n",
            n.n_hosts, n.n_hosts == 1 ? "" : "s", n.replicas_per_host,
            n.replicas_per_host == 1 ? "" : "s", n.bytes_per_second * 8 / 1e9,
            n.latency_seconds * 1e6);
  out.print(
      "    collectives per replica per {}: {} within its host, {} across hosts (sent + "
      "received)\n",
      per, format_bytes(n.on_host_bytes), format_bytes(n.cross_host_bytes));
  out.print("    crossing the network per {}: {} in all, at most {} through one host's link\n", per,
            format_bytes(n.network_bytes), format_bytes(n.busiest_link_bytes));
  out.print("    each way; {} messages from the busiest replica; the network adds {}\n", n.messages,
            format_seconds(n.seconds));
  return folded;
}

}  // namespace

void print_plan(std::ostream& stream, const Plan& plan, const PlanText& options) {
  Printer out(stream);
  const std::size_t width = options.wide ? 0 : kTextWidth;
  print_verdict(out, plan);
  print_setup(out, plan);
  bool folded = print_variables(out, plan, width);
  if (options.ops) print_ops_listing(out, plan, width);
  if (plan.pipeline) print_pipeline(out, plan);
  folded = print_memory(out, plan, width) || folded;
  if (folded)
    out.put(
        "\nRows that repeat with counting numbers are folded into one: h{0..2} stands for h0, h1"
        "\nand h2. Every row: --format wide\n");
  if (!options.ops)
    out.put("\nThe device tensors and the schedule's ops: --ops; every figure: --format json\n");
}

}  // namespace popkit::planner
