// The host memory a run of a plan takes when `poprun` executes it on this CPU, and the
// memory this machine can give. The engine keeps every replica's device tensors and
// remote buffers in host memory, beside the datasets and its own buffers, so a config
// that fits the device can still be far too big for the host: poprun compares the two
// before it allocates anything, and popplan shows the estimate (Plan::host_memory).
//
//   HostMemory need = estimate_host_memory(plan, &eval_plan, config, {train, test});
//   if (auto why = host_memory_problem(need, available_host_memory()); !why.empty()) ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "planner/plan.h"

namespace popkit::planner {

// A dataset as the engine holds it: n samples of image_bytes pixels (one byte each)
// and a one-byte label.
struct DatasetSize {
  std::int64_t n = 0;
  std::int64_t image_bytes = 0;
};

// nullopt: not known before the files are read.
struct DatasetSizes {
  std::optional<DatasetSize> train;
  std::optional<DatasetSize> test;
};

// The sizes a config fixes by itself: synthetic sets (data.synthetic_train/test images
// of model.input_shape); a set read from files is nullopt.
DatasetSizes dataset_sizes_from_config(const config::Config& config);

enum class HostUse {
  kTrain,     // poprun train
  kEvaluate,  // poprun eval: no training set, no training step
};

// The process's peak, all replicas together (R = replication factor), each part at its
// own peak: the parts' peaks need not coincide (the data is read before the engine
// allocates), so their sum errs high. kTrain: `plan` is the training plan and `eval`
// the evaluation plan whose engine poprun holds beside it (nullptr: none); kEvaluate:
// `plan` is the evaluation plan and `eval` is ignored.
//   datasets   train + test (n x (image + label)), plus the largest copy made on the way:
//              the file bytes while a split is read (IDX) or the class prototypes
//              (synthetic, 8 bytes a pixel a class)
//   streaming  R x streaming_bytes of each plan (the remote buffers, zero-filled)
//   device     R x the device memory block of each plan (device_layout.h): the planned
//              peak plus first fit's fragmentation, resident after the first step
//   host       the global batch gathered for the engine, the epoch's sample order
//              (8 bytes a training sample, twice while the next epoch's is made), and the
//              larger of evaluating (a variable's float copy on its way to the
//              evaluation engine, the evaluation batch and its logits) and writing a
//              checkpoint (every variable's full value per copy); poprun eval: the
//              weights it read, and the checkpoint file while it is read
//   overhead   kHostOverhead: code, libraries, thread stacks, the allocator's slack
// Sets that are nullopt count 0 and clear datasets_counted. Sums saturate, so a config
// whose sizes overflow 64 bits gives 2^64 - 1, never a small number.
HostMemory estimate_host_memory(const Plan& plan, const Plan* eval, const config::Config& config,
                                DatasetSizes data, HostUse use = HostUse::kTrain);

// Calibrated on the release build (glibc): poprun peaks at 4.9 MiB RSS for --help and
// 6.8 MiB training tests/train/data/tiny.yaml (its other parts < 0.4 MiB); training
// examples/mnist.yaml and mnist_offchip_optimizer.yaml peaks 11 and 17 MiB above their
// other parts, of which 9 and 12 MiB are freed memory the allocator's per-thread arenas
// keep (MALLOC_ARENA_MAX=1 drops it). With 20 MiB every example's estimate is above its
// measured peak: with the evaluation engine counted, mnist.yaml 73.9 MiB for 53.7 MiB,
// mnist_offchip_optimizer 97.8 for 67.6 (/usr/bin/time -v, 50 steps).
inline constexpr std::uint64_t kHostOverhead = 20ull << 20;

// "74.66 GiB (datasets 73.11 GiB, streaming memory 10.02 MiB, device memory 19.58 MiB,
// host buffers 1.50 GiB, overhead 20.00 MiB)"; "... + the datasets (...)" when not counted.
std::string describe_host_memory(const HostMemory& memory);
// The parts alone: "datasets 73.11 GiB, streaming memory 10.02 MiB, ..., overhead 20.00 MiB".
std::string host_memory_parts(const HostMemory& memory);

struct AvailableMemory {
  std::uint64_t bytes = 0;
  std::string source;  // "MemAvailable in /proc/meminfo", "POPKIT_HOST_MEMORY", ...
};

// What this machine can give a new process: $POPKIT_HOST_MEMORY when set (a byte size
// such as 64MiB; for tests, or to override the guess), else MemAvailable from
// /proc/meminfo, lowered to the memory cgroup's limit when there is one (a container
// sees the host's /proc/meminfo). MemAvailable, not MemTotal: what other processes
// hold is not ours to take, and MemAvailable already counts the page cache the kernel
// would drop. nullopt when nothing can be read (then nothing is checked). Throws
// popkit::Error when POPKIT_HOST_MEMORY is not a byte size.
std::optional<AvailableMemory> available_host_memory();

// "" when `need` fits in `available` (or nothing is known), else "the run needs ... of
// host memory (...) but this machine has ... available (SOURCE)".
std::string host_memory_problem(const HostMemory& need,
                                const std::optional<AvailableMemory>& available);

}  // namespace popkit::planner
