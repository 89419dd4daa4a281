#include "runner/checkpoint.h"

#include <zlib.h>

#include <Eigen/Core>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "base/error.h"
#include "planner/optimizer_kinds.h"
#include "runner/input_refused.h"

namespace popkit::runner {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this code copies floats as they are in memory");

using engine::SafeTensor;
using engine::SafeTensorsFile;
using planner::Variable;
using planner::VariableRole;

std::string shape_str(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

SafeTensor to_tensor(const Variable& v, const std::vector<float>& values) {
  SafeTensor t;
  t.shape = v.meta_shape;
  if (v.dtype == planner::DType::kFloat16) {
    t.dtype = "F16";
    t.data.resize(values.size() * 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const Eigen::half h(values[i]);
      std::memcpy(t.data.data() + 2 * i, &h, 2);
    }
  } else {
    t.dtype = "F32";
    t.data.resize(values.size() * 4);
    std::memcpy(t.data.data(), values.data(), t.data.size());
  }
  return t;
}

std::vector<float> to_floats(const SafeTensor& t) {
  const std::size_t n =
      t.data.size() / static_cast<std::size_t>(engine::safetensors_dtype_size(t.dtype));
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (t.dtype == "F32") {
      std::memcpy(&out[i], t.data.data() + 4 * i, 4);
    } else if (t.dtype == "F16") {
      Eigen::half h;
      std::memcpy(&h, t.data.data() + 2 * i, 2);
      out[i] = static_cast<float>(h);
    } else {  // F64, checked by read_checkpoint
      double d;
      std::memcpy(&d, t.data.data() + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  }
  return out;
}

bool restored(const Variable& v, Restore what) {
  return what == Restore::kEverything || v.role != VariableRole::kOptimizerState;
}

// An evaluation plan holds no optimizer state: in a training checkpoint, "<param>.<suffix>"
// of the plan's optimizer is skipped, not refused.
bool is_training_state(const std::string& base, const planner::Plan& plan,
                       const std::map<std::string, const Variable*>& variables) {
  if (plan.program != planner::Program::kEval) return false;
  const std::size_t dot = base.rfind('.');
  if (dot == std::string::npos || !variables.contains(base.substr(0, dot))) return false;
  const std::string_view suffix = std::string_view(base).substr(dot + 1);
  for (const planner::OptimizerState& st : planner::optimizer_state(plan.optimizer))
    if (st.suffix == suffix) return true;
  return false;
}

// "fc1.weight@group2" -> {"fc1.weight", "group", 2}; a plain name has copy 0.
struct TensorName {
  std::string base;
  std::string kind;  // "", "group" or "replica"
  std::int64_t copy = 0;
};

std::optional<TensorName> split_name(const std::string& name) {
  const auto at = name.find('@');
  if (at == std::string::npos) return TensorName{name, "", 0};
  TensorName out{name.substr(0, at), "", 0};
  const std::string suffix = name.substr(at + 1);
  for (const char* kind : {"group", "replica"}) {
    const std::size_t len = std::strlen(kind);
    if (suffix.compare(0, len, kind) != 0) continue;
    const char* first = suffix.data() + len;
    const char* last = suffix.data() + suffix.size();
    const auto [end, ec] = std::from_chars(first, last, out.copy);
    if (ec != std::errc() || end != last || first == last || out.copy < 1) return std::nullopt;
    out.kind = kind;
    return out;
  }
  return std::nullopt;
}

std::string list(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 6;
  std::vector<std::string> shown(
      names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(kShown, names.size())));
  std::string out = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > kShown) out += fmt::format(" and {} more", names.size() - kShown);
  return out;
}

std::string metadata_string(const SafeTensorsFile& f, const std::string& key) {
  const auto it = f.metadata.find(key);
  return it == f.metadata.end() ? std::string() : it->second;
}

}  // namespace

std::uint32_t checkpoint_checksum(const SafeTensorsFile& file) {
  uLong crc = engine::tensors_checksum(file);
  for (const auto& [key, value] : file.metadata) {
    if (key == "checksum") continue;
    const std::string line = key + "=" + value + "\n";
    crc = crc32(crc, reinterpret_cast<const Bytef*>(line.data()), static_cast<uInt>(line.size()));
  }
  return static_cast<std::uint32_t>(crc);
}

SafeTensorsFile make_checkpoint(const engine::Engine& engine, const CheckpointState& state) {
  const planner::Plan& plan = engine.plan();
  const bool per_replica = plan.retrieval_mode == config::RetrievalMode::kAllReplicas;
  const std::string kind = per_replica ? "replica" : "group";
  SafeTensorsFile file;
  std::size_t n_copies = 1;
  for (const Variable& v : plan.variables) {
    const auto copies = engine.retrieve_variable(v.name);
    n_copies = copies.size();
    for (std::size_t i = 0; i < copies.size(); ++i) {
      const std::string name = i == 0 ? v.name : fmt::format("{}@{}{}", v.name, kind, i);
      file.tensors.emplace(name, to_tensor(v, copies[i]));
    }
  }
  CheckpointMetadata metadata{state, {}};
  metadata.copies = {n_copies == 1 ? "one" : kind, static_cast<std::int64_t>(n_copies),
                     plan.variables_grouping.n_groups(), plan.replication_factor};
  put_checkpoint_metadata(file.metadata, metadata);
  file.metadata["checksum"] = fmt::format("{:08x}", checkpoint_checksum(file));
  return file;
}

void save_checkpoint(const std::string& path, const engine::Engine& engine,
                     const CheckpointState& state) {
  // Every rank gathers (the shards of a variable live on the ranks hosting them); rank 0
  // writes the one file.
  engine::SafeTensorsFile file = make_checkpoint(engine, state);
  if (engine.rank() == 0) engine::write_safetensors(path, file);
}

LoadedCheckpoint read_checkpoint(const std::string& path, const planner::Plan& plan, Restore what) {
  // A file that cannot be read, is damaged or does not fit the model is input the user
  // named: refused (exit 2) like a config, on every rank that reads it.
  try {
    return check_checkpoint(engine::read_safetensors(path), path, plan, what);
  } catch (const InputRefused&) {
    throw;
  } catch (const Error& e) {
    throw InputRefused(e.what());
  }
}

LoadedCheckpoint check_checkpoint(SafeTensorsFile file, const std::string& path,
                                  const planner::Plan& plan, Restore what) {
  LoadedCheckpoint out;
  out.file = std::move(file);
  const SafeTensorsFile& f = out.file;
  out.has_state = metadata_string(f, "format") == kCheckpointFormat;
  if (out.has_state) {
    // The version first (a newer format may checksum otherwise), then the checksum: a
    // damaged file is reported as damaged, not by its symptoms.
    check_format_version(f.metadata, path);
    const std::string stored = metadata_string(f, "checksum");
    const std::string actual = fmt::format("{:08x}", checkpoint_checksum(f));
    if (stored.empty()) throw Error("{}: checkpoint metadata has no checksum", path);
    if (stored != actual)
      throw Error(
          "{}: checksum mismatch: the metadata says {}, the contents give {}: the file "
          "was modified or damaged",
          path, stored, actual);
    CheckpointMetadata metadata = parse_checkpoint_metadata(f.metadata, path);
    out.state = std::move(metadata.state);
    out.copies = std::move(metadata.copies);
  } else if (what == Restore::kEverything) {
    throw Error(
        "{}: not a popkit checkpoint (no '{}' metadata): resuming needs the step and "
        "data position a poprun checkpoint holds; start from its weights with "
        "--init-from instead",
        path, kCheckpointFormat);
  }

  std::map<std::string, const Variable*> variables;
  for (const Variable& v : plan.variables) variables.emplace(v.name, &v);
  std::vector<std::string> unexpected;
  std::set<std::string> present;
  for (const auto& [name, t] : f.tensors) {
    const auto parts = split_name(name);
    const auto it = parts ? variables.find(parts->base) : variables.end();
    if (it == variables.end()) {
      if (parts && is_training_state(parts->base, plan, variables)) continue;
      unexpected.push_back(name);
      continue;
    }
    const Variable& v = *it->second;
    if (out.has_state && !parts->kind.empty() &&
        (parts->kind != out.copies.kind || parts->copy >= out.copies.n_copies))
      throw Error("{}: tensor {} is {} copy {}, but the metadata says copies '{}' (n_copies {})",
                  path, name, parts->kind, parts->copy, out.copies.kind, out.copies.n_copies);
    if (t.shape != v.meta_shape)
      throw Error("{}: does not match the model: tensor {} has shape {}, the model's {} is {}",
                  path, name, shape_str(t.shape), v.name, shape_str(v.meta_shape));
    if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "F64")
      throw Error("{}: tensor {} has dtype {}; checkpoints hold F32, F16 or F64", path, name,
                  t.dtype);
    if (parts->copy == 0) present.insert(v.name);
  }
  std::vector<std::string> missing;
  for (const Variable& v : plan.variables)
    if (restored(v, what) && !present.count(v.name)) missing.push_back(v.name);
  if (!missing.empty() || !unexpected.empty()) {
    std::string why;
    if (!missing.empty()) why = fmt::format("the model's {} missing", list(missing));
    if (!unexpected.empty())
      why += fmt::format("{}{} not in the model", why.empty() ? "" : "; ", list(unexpected));
    throw Error("{}: does not match the model '{}': {}", path, plan.name, why);
  }
  // Every value the run will load must be usable: NaN weights pass a ReLU as 0 and train
  // on unnoticed, an Inf gives a NaN loss. Values are checked as the engine will hold
  // them (float32), so an F64 beyond float32's range counts as Inf.
  const std::vector<planner::OptimizerState> states = planner::optimizer_state(plan.optimizer);
  for (const auto& [name, t] : f.tensors) {
    const auto found = variables.find(split_name(name)->base);
    if (found == variables.end()) continue;  // training state an evaluation plan skips
    const Variable& v = *found->second;
    if (!restored(v, what)) continue;
    const std::vector<float> values = to_floats(t);
    const auto n_bad =
        std::count_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
    if (n_bad > 0)
      throw Error("{}: tensor {}: {} of {} values are not finite (NaN or Inf){}", path, name, n_bad,
                  values.size(), t.dtype == "F64" ? " as float32" : "");
    if (v.role != VariableRole::kOptimizerState) continue;
    // A state the optimizer kind keeps non-negative (planner/optimizer_kinds.h).
    for (const planner::OptimizerState& st : states) {
      if (st.non_negative.empty() || !v.name.ends_with(fmt::format(".{}", st.suffix))) continue;
      const auto n_negative =
          std::count_if(values.begin(), values.end(), [](float x) { return x < 0.0f; });
      if (n_negative > 0)
        throw Error("{}: tensor {}: {} of {} values are negative ({})", path, name, n_negative,
                    values.size(), st.non_negative);
    }
  }
  return out;
}

void restore_checkpoint(engine::Engine& engine, const LoadedCheckpoint& checkpoint,
                        const std::string& path, Restore what) {
  const planner::Plan& plan = engine.plan();
  const SafeTensorsFile& f = checkpoint.file;
  // How many copies the checkpoint holds, and of what.
  std::string kind;
  std::int64_t n_copies = 1;
  for (const auto& [name, t] : f.tensors) {
    const auto parts = split_name(name);
    if (!parts || parts->kind.empty()) continue;
    kind = parts->kind;
    n_copies = std::max(n_copies, parts->copy + 1);
  }
  const std::int64_t n_groups = plan.variables_grouping.n_groups();
  // A copy index for every group of this plan, or none (the plain value everywhere).
  std::vector<std::int64_t> copy_of_group(static_cast<std::size_t>(n_groups), 0);
  if (kind == "group" && n_copies == n_groups) {
    for (std::int64_t g = 0; g < n_groups; ++g) copy_of_group[static_cast<std::size_t>(g)] = g;
  } else if (kind == "replica" && n_copies == plan.replication_factor) {
    for (std::int64_t g = 0; g < n_groups; ++g)
      copy_of_group[static_cast<std::size_t>(g)] = plan.variables_grouping.member(g, 0);
  } else if (!kind.empty() && what == Restore::kEverything &&
             !(checkpoint.has_state && checkpoint.copies.n_groups == 1)) {
    throw Error(
        "{}: holds {} {} copies of each variable but the config has {} groups of {} "
        "replicas; resume with the checkpoint's replica grouping",
        path, n_copies, kind, n_groups, plan.variables_grouping.group_size);
  }
  for (const Variable& v : plan.variables) {
    if (!restored(v, what)) continue;
    for (std::int64_t g = 0; g < n_groups; ++g) {
      const std::int64_t c = copy_of_group[static_cast<std::size_t>(g)];
      const std::string name = c == 0 ? v.name : fmt::format("{}@{}{}", v.name, kind, c);
      const auto it = f.tensors.find(name);
      if (it == f.tensors.end())
        throw Error("{}: does not match the model: {} is missing", path, name);
      engine.write_variable(v.name, g, to_floats(it->second));
    }
  }
  if (what == Restore::kEverything) engine.set_steps_done(checkpoint.state.step);
}

}  // namespace popkit::runner
