// The host memory estimate and what this machine has; see host_memory.h.
#include "planner/host_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "base/units.h"
#include "planner/device_layout.h"
#include "planner/optimizer_kinds.h"
#include "planner/plan_text.h"
#include "planner/rank_messages.h"

namespace popkit::planner {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::uint64_t add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? kMax : s;
}

std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? kMax : p;
}

std::uint64_t u(std::int64_t v) {
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

// n x (image + label)
std::uint64_t held(const DatasetSize& d) {
  return mul(u(d.n), add(u(d.image_bytes), u(d.label_bytes)));
}

// The copy made while a split is loaded: the file's bytes beside the dataset (IDX), one
// float64 prototype image per class (synthetic), or a text file's bytes twice (as read,
// and as the corpus the windows are cut from).
std::uint64_t loading_copy(const DatasetSize& d, const Plan& plan, const config::Config& config) {
  if (config.data.dataset == config::Dataset::kSynthetic)
    return mul(mul(u(plan.n_classes), u(d.image_bytes)), 8);
  if (d.file_bytes > 0) return mul(u(d.file_bytes), 2);
  return add(held(d), 16 + 8);  // the two IDX headers
}

std::uint64_t datasets_bytes(const Plan& plan, const config::Config& config,
                             const DatasetSizes& data) {
  const std::uint64_t train = data.train ? held(*data.train) : 0;
  const std::uint64_t test = data.test ? held(*data.test) : 0;
  std::uint64_t extra = 0;
  if (data.train) extra = std::max(extra, loading_copy(*data.train, plan, config));
  if (data.test) extra = std::max(extra, loading_copy(*data.test, plan, config));
  // Training on text keeps the file's bytes: each epoch shifts its windows through them.
  const std::uint64_t corpus = data.train ? u(data.train->file_bytes) : 0;
  return add(add(add(train, test), extra), corpus);
}

// The ranks on a host besides one of them.
std::uint64_t others_on_host(std::int64_t ranks_on_host) {
  return ranks_on_host > 1 ? u(ranks_on_host) - 1 : 0;
}

// The replicas of `plan` this process hosts: R / ranks (the ranks divide R, or poprun
// refuses the run before it estimates).
std::uint64_t hosted(const Plan& plan, const ProcessShare& share) {
  return u(plan.replication_factor) / std::max<std::uint64_t>(1, u(share.ranks));
}

// An engine holds one block of device memory per hosted replica (device_layout.h).
std::uint64_t device_bytes(const Plan& plan, const ProcessShare& share) {
  return mul(device_block_bytes(plan), hosted(plan, share));
}

std::uint64_t image_bytes(const Plan& plan) {
  std::uint64_t image = 1;
  for (const std::int64_t d : plan.input_shape) image = mul(image, u(d));
  return image;
}

// Running the evaluation plan: its batch gathered for the engine (padded micro-batches,
// pixels and labels, every replica's) and the logits the hosted replicas stream out,
// A x mb rows of n_classes each.
std::uint64_t evaluation_bytes(const Plan& eval, const ProcessShare& share) {
  const std::uint64_t rows = u(eval.global_batch_size);
  const std::uint64_t hosted_rows =
      mul(rows / std::max<std::uint64_t>(1, u(eval.replication_factor)), hosted(eval, share));
  return add(mul(rows, add(image_bytes(eval), 1)), mul(mul(hosted_rows, u(eval.n_classes)), 4));
}

// Every replica's measured memory in every phase of each plan: the run file's JSON on the
// rank that writes it, the gathered samples on the others.
std::uint64_t run_file_bytes(const Plan& plan, const Plan* eval, const ProcessShare& share) {
  std::uint64_t phases = plan.phases.size();
  if (eval) phases = add(phases, eval->phases.size());
  return mul(mul(u(plan.replication_factor), phases),
             share.writer ? kRunFileBytesPerReplicaPhase : kRecordBytesPerReplicaPhase);
}

// An engine's bookkeeping of its hosted replicas.
std::uint64_t bookkeeping_bytes(const Plan& plan, const ProcessShare& share) {
  const std::uint64_t per_replica = add(add(kDeviceBytes, mul(plan.tensors.size(), sizeof(void*))),
                                        mul(plan.phases.size(), kPhaseSampleBytes));
  return mul(hosted(plan, share), per_replica);
}

// The process before its parts, OpenMPI's memory included under mpirun.
std::uint64_t process_bytes(const ProcessShare& share) {
  if (!share.mpi) return kProcessBytes;
  return add(add(kProcessBytes, kMpiProcessBytes),
             mul(others_on_host(share.ranks_on_host), kMpiPeerBytes));
}

// A rank's memory for the collectives' messages to other ranks (rank_messages.h).
std::uint64_t messages_bytes(const Plan& plan, const Plan* eval, const ProcessShare& share) {
  RankMessages most = rank_messages(plan, share.ranks);
  if (eval) {
    const RankMessages e = rank_messages(*eval, share.ranks);
    most = {std::max(most.pieces, e.pieces), std::max(most.receive_bytes, e.receive_bytes)};
  }
  return add(mul(most.pieces, kMpiPieceBytes), most.receive_bytes);
}

std::uint64_t copies_of(const Plan& plan) {
  return plan.retrieval_mode == config::RetrievalMode::kAllReplicas
             ? u(plan.replication_factor)
             : u(plan.variables_grouping.n_groups());
}

std::uint64_t host_buffer_bytes(const Plan& plan, const Plan* eval, const config::Config& config,
                                const DatasetSizes& data, HostUse use, const ProcessShare& share) {
  const std::uint64_t copies = copies_of(plan);
  if (use == HostUse::kEvaluate) {
    // poprun eval holds the checkpoint it read (the weights and biases) while it
    // evaluates; reading it holds the file's bytes beside them, the optimizer's state
    // included, as training wrote it.
    std::uint64_t held_weights = 0, file = 0, state_per_elem = 0;
    for (const OptimizerState& st : optimizer_state(config.training.optimizer))
      state_per_elem += u(dtype_size(st.dtype));
    for (const Variable& v : plan.variables) {
      const std::uint64_t w = mul(mul(u(v.nelms), u(dtype_size(v.dtype))), copies);
      held_weights = add(held_weights, w);
      file = add(file, add(w, mul(mul(u(v.nelms), state_per_elem), copies)));
    }
    return add(held_weights, std::max(evaluation_bytes(plan, share), file));
  }
  std::uint64_t checkpoint = 0;
  std::uint64_t largest = 0;
  for (const Variable& v : plan.variables) {
    checkpoint = add(checkpoint, mul(mul(u(v.nelms), u(dtype_size(v.dtype))), copies));
    largest = std::max(largest, mul(u(v.nelms), 4));
  }
  // Evaluating: the weights go over to the evaluation engine one variable at a time
  // (its float copy), then the evaluation plan runs.
  const std::uint64_t evaluation = eval ? add(largest, evaluation_bytes(*eval, share)) : 0;
  // Writing a checkpoint: the safetensors tensors and one variable's float copies.
  const std::uint64_t writing = add(checkpoint, mul(largest, copies));
  const std::uint64_t batch = mul(u(plan.global_batch_size), add(image_bytes(plan), 1));
  const std::uint64_t order = data.train ? mul(u(data.train->n), 16) : 0;
  return add(add(batch, order), std::max({evaluation, writing, run_file_bytes(plan, eval, share)}));
}

// "MemAvailable:   22640652 kB" -> bytes
std::optional<std::uint64_t> meminfo_field(const std::string& name) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    std::uint64_t kib = 0;
    std::string unit;
    if (fields >> kib >> unit && unit == "kB") return mul(kib, 1024);
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> read_limit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  std::uint64_t v = 0;
  std::istringstream parse(text);
  // v1 says "unlimited" with a number just under 2^63.
  if (parse >> v && v < (std::uint64_t{1} << 62)) return v;
  return std::nullopt;
}

// The tightest memory cgroup limit on this process: its own cgroup's and every
// ancestor's (v2 memory.max, v1 memory.limit_in_bytes), paths from /proc/self/cgroup.
// nullopt when unlimited or unreadable.
std::optional<std::uint64_t> cgroup_limit() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::optional<std::uint64_t> out;
  while (std::getline(in, line)) {
    // "0::/a/b" (v2) or "4:memory:/a/b" (v1)
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string dir;
    std::string file;
    if (controllers.empty()) {
      dir = "/sys/fs/cgroup";
      file = "memory.max";
    } else if (controllers == "memory" || controllers.find("memory,") == 0 ||
               controllers.find(",memory") != std::string::npos) {
      dir = "/sys/fs/cgroup/memory";
      file = "memory.limit_in_bytes";
    } else {
      continue;
    }
    std::string path = line.substr(second + 1);
    while (true) {
      if (const auto limit = read_limit(dir + path + (path.ends_with('/') ? "" : "/") + file))
        out = std::min(out.value_or(kMax), *limit);
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.rfind('/'));
    }
  }
  return out;
}

}  // namespace

std::uint64_t HostMemory::total() const {
  return add(add(add(datasets, streaming), add(device, host_buffers)), overhead);
}

DatasetSizes dataset_sizes_from_config(const config::Config& config) {
  if (config.data.dataset != config::Dataset::kSynthetic) return {};
  std::int64_t image = 1;
  for (const std::int64_t d : config.model.input_shape)
    if (__builtin_mul_overflow(image, d, &image)) image = std::numeric_limits<std::int64_t>::max();
  return {DatasetSize{config.data.synthetic_train, image},
          DatasetSize{config.data.synthetic_test, image}};
}

HostMemory estimate_host_memory(const Plan& plan, const Plan* eval, const config::Config& config,
                                DatasetSizes data, HostUse use, const ProcessShare& share) {
  if (use == HostUse::kEvaluate) {
    data.train = DatasetSize{};  // not read
    eval = nullptr;              // `plan` is the evaluation plan
  }
  HostMemory m;
  m.datasets = datasets_bytes(plan, config, data);
  m.datasets_counted = data.train.has_value() && data.test.has_value();
  m.streaming = mul(plan.streaming_bytes, hosted(plan, share));
  m.device = device_bytes(plan, share);
  if (eval) {
    m.streaming = add(m.streaming, mul(eval->streaming_bytes, hosted(*eval, share)));
    m.device = add(m.device, device_bytes(*eval, share));
  }
  m.host_buffers = host_buffer_bytes(plan, eval, config, data, use, share);
  m.overhead = add(process_bytes(share), bookkeeping_bytes(plan, share));
  if (eval) m.overhead = add(m.overhead, bookkeeping_bytes(*eval, share));
  m.overhead = add(m.overhead, messages_bytes(plan, eval, share));
  return m;
}

std::string host_memory_parts(const HostMemory& m) {
  return fmt::format(
      "{}streaming memory {}, device memory {}, host buffers {}, overhead {}",
      m.datasets_counted ? fmt::format("datasets {}, ", format_bytes(m.datasets)) : "",
      format_bytes(m.streaming), format_bytes(m.device), format_bytes(m.host_buffers),
      format_bytes(m.overhead));
}

std::string describe_host_memory(const HostMemory& m) {
  return fmt::format("{}{} ({})", format_bytes(m.total()),
                     m.datasets_counted ? "" : " + the datasets", host_memory_parts(m));
}

std::optional<AvailableMemory> available_host_memory() {
  if (const char* env = std::getenv("POPKIT_HOST_MEMORY"); env && *env) {
    std::string why;
    const auto bytes = parse_bytes(env, why);
    if (!bytes)
      throw Error("POPKIT_HOST_MEMORY: '{}' is not a byte size: {} (units {})", env, why,
                  kByteUnits);
    return AvailableMemory{*bytes, "POPKIT_HOST_MEMORY"};
  }
  std::optional<AvailableMemory> out;
  if (const auto avail = meminfo_field("MemAvailable"))
    out = AvailableMemory{*avail, "MemAvailable in /proc/meminfo"};
  if (const auto limit = cgroup_limit(); limit && (!out || *limit < out->bytes))
    out = AvailableMemory{*limit, "the memory cgroup's limit"};
  return out;
}

std::string host_memory_problem(const HostMemory& need,
                                const std::optional<AvailableMemory>& available) {
  if (!available || need.total() <= available->bytes) return "";
  return fmt::format(
      "the run needs {} of host memory{} ({}) but this machine has {} available ({})",
      format_bytes(need.total()), need.datasets_counted ? "" : " besides its datasets",
      host_memory_parts(need), format_bytes(available->bytes), available->source);
}

std::uint64_t RanksMemory::total() const {
  return add(writer.total(), mul(rank.total(), others_on_host(ranks_on_host)));
}

std::string ranks_memory_problem(const RanksMemory& need,
                                 const std::optional<AvailableMemory>& available) {
  if (!available || need.total() <= available->bytes) return "";
  const std::string besides = need.rank.datasets_counted ? "" : " besides their datasets";
  const std::string have = fmt::format("but this machine has {} available ({})",
                                       format_bytes(available->bytes), available->source);
  if (need.ranks_on_host <= 1)
    return fmt::format("the run's rank on this host needs {} of host memory{} ({}) {}",
                       format_bytes(need.total()), besides, host_memory_parts(need.writer), have);
  const std::uint64_t writer = need.writer.total(), rank = need.rank.total();
  return fmt::format("the {} ranks on this host need {} of host memory{}: {} a rank ({}){}, {}",
                     need.ranks_on_host, format_bytes(need.total()), besides, format_bytes(rank),
                     host_memory_parts(need.rank),
                     writer > rank ? fmt::format(" and rank 0 {} more for the run file",
                                                 format_bytes(writer - rank))
                                   : "",
                     have);
}

}  // namespace popkit::planner
