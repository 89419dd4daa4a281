// The text printout of a plan and of replica groupings.
#include "planner/plan_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "planner/host_memory.h"
#include "planner/names.h"

namespace popkit::planner {
namespace {

// A table with columns separated by " | ", a rule under the header; numeric columns
// right-aligned.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> right)
      : header_(std::move(header)), right_(std::move(right)) {
    right_.resize(header_.size(), false);
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  void print(std::ostream& out, const std::string& indent = "  ") const {
    std::vector<std::size_t> width(header_.size());
    for (std::size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
    for (const auto& r : rows_)
      for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
    print_row(out, indent, header_, width);
    out << indent;
    for (std::size_t c = 0; c < width.size(); ++c) {
      if (c > 0) out << "-+-";
      out << std::string(width[c], '-');
    }
    out << '\n';
    for (const auto& r : rows_) print_row(out, indent, r, width);
  }

 private:
  void print_row(std::ostream& out, const std::string& indent, const std::vector<std::string>& r,
                 const std::vector<std::size_t>& width) const {
    std::string line = indent;
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (c > 0) line += " | ";
      line += right_[c] ? fmt::format("{:>{}}", r[c], width[c])
                        : (c + 1 == r.size() ? r[c] : fmt::format("{:<{}}", r[c], width[c]));
    }
    out << line << '\n';
  }

  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

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

std::string op_text(const Plan& plan, const Op& op) {
  const std::string kind(op_kind_name(op.kind));
  switch (op.kind) {
    case OpKind::kAllGather:
    case OpKind::kSliceShard:
      return fmt::format("{:<15} {}  [{}]", kind, op.label, grouping_text(op.grouping));
    case OpKind::kReduceScatter:
      return fmt::format("{:<15} {}  [{}; shards {}]", kind, op.label, grouping_text(op.grouping),
                         grouping_text(op.shard_grouping));
    case OpKind::kAllReduce:
      return fmt::format("{:<15} {}  [{}]", kind, op.label, grouping_text(op.grouping));
    case OpKind::kForward:
      return fmt::format("{:<15} {}: {} -> {}{}", kind, op.label, tensor_name(plan, op.in),
                         op.pre >= 0 ? tensor_name(plan, op.pre) + " -> " : "",
                         tensor_name(plan, op.out));
    case OpKind::kBackward:
      return fmt::format("{:<15} {}: dy {} -> dx {}; grads {}, {}", kind, op.label,
                         tensor_name(plan, op.dy), tensor_name(plan, op.dx),
                         tensor_name(plan, op.grad_weight), tensor_name(plan, op.grad_bias));
    case OpKind::kLoss:
      return fmt::format("{:<15} {}: {}, {} -> {}, {}", kind, op.label, tensor_name(plan, op.in),
                         tensor_name(plan, op.labels), tensor_name(plan, op.out),
                         tensor_name(plan, op.dx));
    default:
      return fmt::format("{:<15} {}", kind, op.label);
  }
}

void print_ops(std::ostream& out, const Plan& plan, const std::vector<Op>& ops,
               const std::string& indent) {
  for (const Op& op : ops) {
    if (op.kind == OpKind::kRepeat) {
      out << fmt::format("{}repeat {} x ({}) {{\n", indent, op.steps, io_mode_name(op.io_mode));
      print_ops(out, plan, op.body, indent + "  ");
      out << indent << "}\n";
    } else {
      out << indent << op_text(plan, op) << '\n';
    }
  }
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

void print_plan(std::ostream& out, const Plan& plan) {
  out << fmt::format("Plan {} (plan format {})\n", plan.name.empty() ? "(unnamed)" : plan.name,
                     plan.version);
  out << fmt::format("  replicas {}, micro-batch {}, gradient accumulation {}, global batch {}\n",
                     plan.replication_factor, plan.micro_batch_size, plan.gradient_accumulation,
                     plan.global_batch_size);
  out << fmt::format("  mode {}, io_mode {}, device {} ({} per replica)\n",
                     execution_mode_name(plan.mode), io_mode_name(plan.io_mode),
                     plan.device_profile, format_bytes(plan.memory_per_replica));
  out << fmt::format("  variables: {}, retrieval {}\n", grouping_text(plan.variables_grouping),
                     retrieval_mode_name(plan.retrieval_mode));
  if (plan.sharding_threshold > 0)
    out << fmt::format("  sharding: nelms >= {} over {}\n", plan.sharding_threshold,
                       grouping_text(plan.sharding_grouping));
  else
    out << "  sharding: off\n";

  out << "\nLayers\n";
  TextTable layers({"Layer", "In", "Out", "Activation", "Graph", "Row"},
                   {false, true, true, false, true, true});
  for (const auto& l : plan.layers)
    layers.add({l.name, std::to_string(l.in_features), std::to_string(l.out_features),
                std::string(activation_name(l.activation)), std::to_string(l.graph),
                std::to_string(l.row)});
  layers.print(out);

  out << "\nRemote buffers (per replica)\n";
  TextTable buffers({"Buffer", "Class", "Dtype", "Element shape", "Rows x steps", "Entries",
                     "Entry bytes", "Bytes"},
                    {false, false, false, false, true, true, true, true});
  for (const auto& b : plan.buffers)
    buffers.add({b.name, std::string(tensor_class_name(b.cls)), std::string(dtype_name(b.dtype)),
                 shape_text(b.element_shape), fmt::format("{} x {}", b.rows, b.steps),
                 std::to_string(b.entries()), std::to_string(b.entry_bytes),
                 format_bytes(b.nbytes())});
  buffers.print(out);

  out << "\nTensors (variables)\n";
  TextTable vars({"Name", "Shape", "Elements", "Dtype", "Class", "Placement", "Sharded",
                  "Shard size", "Padding"},
                 {false, false, true, false, false, false, false, true, true});
  for (const auto& v : plan.variables)
    vars.add({v.name, shape_text(v.meta_shape), std::to_string(v.nelms),
              std::string(dtype_name(v.dtype)), std::string(tensor_class_name(v.cls)),
              placement(plan, v), v.sharded ? "yes" : "no", std::to_string(v.shard_size),
              std::to_string(v.padding)});
  vars.print(out);

  out << "\nDevice tensors (per replica)\n";
  TextTable tensors(
      {"Name", "Shape", "Elements", "Dtype", "Class", "Bytes", "Always live", "Second slot"},
      {false, false, true, false, false, true, false, false});
  for (const auto& t : plan.tensors)
    tensors.add({t.name, shape_text(t.shape), std::to_string(t.nelms),
                 std::string(dtype_name(t.dtype)), std::string(tensor_class_name(t.cls)),
                 std::to_string(t.nbytes), t.always_live ? "yes" : "no",
                 t.double_buffer >= 0 ? tensor_name(plan, t.double_buffer) : "-"});
  tensors.print(out);

  out << "\nSchedule (per optimizer step)\n";
  out << "  setup (once):\n";
  print_ops(out, plan, plan.setup, "    ");
  for (std::size_t p = 0; p < plan.phases.size(); ++p) {
    out << fmt::format("  phase {}: {}\n", p + 1, plan.phases[p].name);
    print_ops(out, plan, plan.phases[p].ops, "    ");
  }

  out << "\nMemory per replica\n";
  TextTable mem({"Phase", "Peak", "Always live", "Not always live", "Weights", "Grad acc",
                 "Optimizer", "Activations", "IO slots", "Est. time"},
                {false, true, true, true, true, true, true, true, true, true});
  for (std::size_t p = 0; p < plan.phases.size(); ++p) {
    const Phase& ph = plan.phases[p];
    std::vector<std::string> row{fmt::format("{}: {}", p + 1, ph.name),
                                 format_bytes(ph.memory.peak), format_bytes(ph.memory.always_live),
                                 format_bytes(ph.memory.not_always_live)};
    for (auto b : ph.memory.peak_by_class) row.push_back(format_bytes(b));
    row.push_back(fmt::format("{:.3f} ms", ph.estimated_seconds * 1e3));
    mem.add(row);
  }
  mem.print(out);
  out << fmt::format("  program peak {} (phase {}), always live {}, device {}\n",
                     format_bytes(plan.peak_bytes), plan.peak_phase + 1,
                     format_bytes(plan.always_live_bytes), format_bytes(plan.memory_per_replica));
  out << fmt::format("  streaming memory {}, host transfers {} per step\n",
                     format_bytes(plan.streaming_bytes), format_bytes(plan.host_bytes_per_step));
  out << fmt::format("  host memory of poprun on a CPU {}\n",
                     describe_host_memory(plan.host_memory));
  out << fmt::format("  estimated {:.3f} ms per step, {:.0f} samples/s on {}\n",
                     plan.estimated_step_seconds * 1e3, plan.estimated_samples_per_second,
                     plan.device_profile);

  for (const auto& w : plan.warnings) out << "\nwarning: " << w << '\n';
  if (plan.fits) {
    out << fmt::format("\nFits: peak {} of {} per replica\n", format_bytes(plan.peak_bytes),
                       format_bytes(plan.memory_per_replica));
  } else {
    const NotFitting& nf = plan.not_fitting;
    out << fmt::format("\nDoes not fit: phase '{}' needs {} more than the {} per replica\n",
                       nf.phase, format_bytes(nf.bytes_over),
                       format_bytes(plan.memory_per_replica));
    out << "  largest live tensors at the peak:\n";
    for (const auto& l : nf.largest) out << "    " << l << '\n';
    out << "  what would help:\n";
    for (const auto& s : nf.suggestions) out << "    - " << s << '\n';
  }
}

}  // namespace popkit::planner
