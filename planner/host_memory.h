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
  std::int64_t label_bytes = 1;  // a text window's: its T targets
  // A text split: the bytes of the whole file it is cut from (0 for images).
  std::int64_t file_bytes = 0;
};

// nullopt: not known before the files are read.
struct DatasetSizes {
  std::optional<DatasetSize> train;
  std::optional<DatasetSize> test;
};

// The sizes a config fixes by itself: synthetic sets (data.synthetic_train/test images
// of model.input_shape); a set read from files is nullopt.
DatasetSizes dataset_sizes_from_config(const config::Config& config);

// The processes a run's R replicas are spread over: one process holding all R (popplan's
// figure; poprun without mpirun), or `ranks` MPI ranks (mpirun -np, poprun --processes)
// holding R / ranks each, `ranks_on_host` of them on this host, of which rank 0
// (`writer`) writes the run file.
struct ProcessShare {
  std::int64_t ranks = 1;
  bool writer = true;
  bool mpi = false;  // started by mpirun: the process holds OpenMPI's memory too
  std::int64_t ranks_on_host = 1;
};

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
//              largest of evaluating (a variable's float copy on its way to the
//              evaluation engine, the evaluation batch and its logits), writing a
//              checkpoint (every variable's full value per copy) and writing the run file
//              (each replica's measured memory in each phase of each plan, as JSON);
//              poprun eval: the weights it read, and the checkpoint file while it is read
//   overhead   the process itself (kProcessBytes) and each engine's bookkeeping of each
//              replica: its device (kDeviceBytes), a pointer per tensor of the plan and a
//              memory sample per phase (kPhaseSampleBytes)
//              and under mpirun OpenMPI (kMpiProcessBytes, kMpiPeerBytes) and the
//              collectives' messages to other ranks (rank_messages.h)
// Thread stacks and the allocator's per-thread arenas are left out: 17 KiB a thread
// (quick.yaml at R 16, --threads 1 to 16: 10.4 to 10.6 MiB peak RSS), and the plan
// does not know poprun's thread count. Sets that are nullopt count 0 and clear
// datasets_counted. Sums saturate, so a config whose sizes overflow 64 bits gives
// 2^64 - 1, never a small number.
//
// `share`: the process's part of the run. Over several MPI ranks each rank holds the
// device blocks, remote buffers and bookkeeping of its own R / ranks replicas and the
// logits they evaluate, but all of the rest: every rank loads both datasets, gathers the
// whole global batch and evaluation batch, makes the epoch's order, gathers every copy
// of each variable for a checkpoint and every replica's measured memory for the run
// file; rank 0 alone writes the files (the run file's JSON).
HostMemory estimate_host_memory(const Plan& plan, const Plan* eval, const config::Config& config,
                                DatasetSizes data, HostUse use = HostUse::kTrain,
                                const ProcessShare& share = {});

// The figures the estimate does not derive from the plan, measured on the release build
// (glibc, /usr/bin/time -v and heaptrack; bench/host_memory.sh compares the whole):
// A training process before its parts: code, libraries, static data, the main thread's
// stack. `poprun train examples/quick.yaml` (R 1, parts 0.24 MiB) peaks at 9.4 MiB.
inline constexpr std::uint64_t kProcessBytes = 9ull << 20;
// An engine's device of one replica besides its tensors' pointers and phase samples
// (its memory account, first fit's free list, its remote store's index), and a phase's
// memory sample: heaptrack of quick.yaml at R 4096 counts 6.5 MB of bookkeeping in its
// two engines, 1.6 KB a replica.
inline constexpr std::uint64_t kDeviceBytes = 256;
inline constexpr std::uint64_t kPhaseSampleBytes = 64;
// A replica's measured memory in one phase as the run file is written: its JSON object
// (about 25 allocations) and its share of the text and of the file's buffer. heaptrack of
// quick.yaml at R 4096 (5 + 3 phases) counts 1.5 KiB requested a (replica, phase); with
// malloc's chunk headers and the freed memory it keeps, 2.6 KiB of the peak RSS (277.6
// MiB, the estimate's other parts 193.2 MiB).
inline constexpr std::uint64_t kRunFileBytesPerReplicaPhase = 2560;
// A rank other than rank 0 holds every replica's measured memory in each phase too (the
// engine's gathered samples and the run record's), but writes no JSON.
inline constexpr std::uint64_t kRecordBytesPerReplicaPhase = 256;
// An MPI rank besides a process's own kProcessBytes: OpenMPI's libraries and buffers
// (kMpiProcessBytes), and its shared-memory transport to each other rank on the host
// (kMpiPeerBytes). quick.yaml at R 4 (mpirun -np N, each rank under /usr/bin/time -v,
// the process's other parts 0.2 MiB) peaks at 16.4 to 16.5 MiB a rank over 2 ranks,
// 18.6 to 18.8 MiB over 4.
inline constexpr std::uint64_t kMpiProcessBytes = 6ull << 20;
inline constexpr std::uint64_t kMpiPeerBytes = 1ull << 20;
// What a rank keeps for the collectives' messages to other ranks (rank_messages.h), per
// piece of the most one collective moves: the collective's record of it and the
// transport's, kept for the next collective (pieces side by side in memory share one
// block of the message's datatype, so the datatype adds little). Fitted to quick.yaml
// over 2 ranks at R 512 to 4096 (bench/host_memory.sh --mpi 2: up to 4.2 million pieces
// a collective, 61 to 70 B a piece above the rest of the estimate).
inline constexpr std::uint64_t kMpiPieceBytes = 68;

// "74.66 GiB (datasets 73.11 GiB, streaming memory 10.02 MiB, device memory 19.58 MiB,
// host buffers 1.50 GiB, overhead 9.05 MiB)"; "... + the datasets (...)" when not counted.
std::string describe_host_memory(const HostMemory& memory);
// The parts alone: "datasets 73.11 GiB, streaming memory 10.02 MiB, ..., overhead 9.05 MiB".
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

// What the `ranks_on_host` MPI ranks on one host need together: `rank` each (a rank's
// estimate, ProcessShare::writer false), one of them rank 0 with `writer`'s. A rank does
// not know whether rank 0 shares its host, so every host counts it: the sum errs high by
// the run file's JSON on hosts without rank 0.
struct RanksMemory {
  HostMemory rank;
  HostMemory writer;
  std::int64_t ranks_on_host = 1;
  [[nodiscard]] std::uint64_t total() const;  // saturated at 2^64 - 1
};

// "" when the ranks fit in `available` (or nothing is known), else "the 4 ranks on this
// host need ... of host memory: ... a rank (...) and rank 0 ... more for the run file, but
// this machine has ... available (SOURCE)".
std::string ranks_memory_problem(const RanksMemory& need,
                                 const std::optional<AvailableMemory>& available);

}  // namespace popkit::planner
