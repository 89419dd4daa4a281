// Checkpoints: round trips of every variable (F32 and F16 moments), copies per group and
// per replica, metadata; and every kind of bad checkpoint caught with a message that
// names the file and what is wrong.
#include "runner/checkpoint.h"

#include <sys/stat.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <limits>
#include <map>

#include "base/error.h"
#include "helpers.h"
#include "planner/build.h"

using namespace popkit;
using namespace popkit::runner;
using namespace popkit::runner::testing;

namespace {

engine::EngineOptions two_threads() {
  engine::EngineOptions o;
  o.n_threads = 2;
  return o;
}

// Every variable of every replica, as raw float bit patterns.
std::vector<std::vector<float>> state_of(const engine::Engine& e) {
  std::vector<std::vector<float>> out;
  for (const auto& name : e.variable_names())
    for (std::int64_t r = 0; r < e.plan().replication_factor; ++r)
      out.push_back(e.read_variable_of_replica(name, r));
  return out;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a,
                   const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// Trains `steps` steps of config on consecutive batches (distinct per group when the
// grouping has several groups, since each group trains on its own replicas' data).
void train_steps(engine::Engine& e, const engine::Dataset& data, std::int64_t steps) {
  const auto& p = e.plan();
  engine::DatasetBatches batches(data, p.replication_factor, p.gradient_accumulation,
                                 p.micro_batch_size);
  const auto order = epoch_order(data.n, 1, 0, true);
  for (std::int64_t s = 0; s < steps; ++s) {
    batches.set_batch(order, s);
    e.train_step(batches);
  }
}

CheckpointState some_state(const config::Config& c) {
  CheckpointState s;
  s.step = 3;
  s.data = {1, 64};
  s.shuffle_seed = c.training.seed;
  s.global_batch_size = 32;
  s.n_train = 512;
  s.config_name = c.name;
  s.config_hash = "0123456789abcdef";
  return s;
}

// A checkpoint of the tiny model after 3 steps, written to dir/ckpt.safetensors.
std::string tiny_checkpoint(const fs::path& dir, const config::Config& c) {
  const planner::Plan plan = planner::build_plan(c);
  engine::Engine e(plan, two_threads());
  e.initialize();
  train_steps(e, engine::load_dataset(c, engine::Split::kTrain), 3);
  const std::string path = (dir / "ckpt.safetensors").string();
  save_checkpoint(path, e, some_state(c));
  return path;
}

// Restores `path` into a fresh engine of `c` and returns its state.
std::vector<std::vector<float>> restored_state(const config::Config& c, const std::string& path,
                                               std::int64_t* steps_done = nullptr) {
  const planner::Plan plan = planner::build_plan(c);
  engine::Engine e(plan, two_threads());
  e.initialize();
  const auto ckpt = read_checkpoint(path, plan, Restore::kEverything);
  restore_checkpoint(e, ckpt, path, Restore::kEverything);
  if (steps_done) *steps_done = e.steps_done();
  return state_of(e);
}

// A safetensors file with the JSON header `header` (padded to 8 bytes) and `data`.
std::string write_raw_safetensors(const fs::path& path, std::string header,
                                  const std::vector<char>& data = {}) {
  header.append((8 - header.size() % 8) % 8, ' ');
  // Reserved up front: GCC 12 at -O3 reports a false -Warray-bounds for an insert that
  // grows a vector of 8.
  std::vector<char> bytes;
  bytes.reserve(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  write_bytes(path, bytes);
  return path.string();
}

void set_float(engine::SafeTensor& t, std::size_t i, float value) {
  BOOST_REQUIRE(t.dtype == "F32");
  std::memcpy(t.data.data() + 4 * i, &value, 4);
}

std::string safetensors_error(const std::string& path) {
  return error_of([&] { engine::read_safetensors(path); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(round_trip_restores_every_variable_bitwise) {
  for (const char* dtype : {"float32", "float16"}) {
    BOOST_TEST_CONTEXT("first_order_dtype " << dtype) {
      const auto dir = scratch(std::string("round_trip_") + dtype);
      const auto c = tiny_config({std::string("training.optimizer.first_order_dtype=") + dtype});
      const planner::Plan plan = planner::build_plan(c);
      engine::Engine e(plan, two_threads());
      e.initialize();
      train_steps(e, engine::load_dataset(c, engine::Split::kTrain), 3);
      const std::string path = (dir / "ckpt.safetensors").string();
      save_checkpoint(path, e, some_state(c));

      std::int64_t steps_done = 0;
      BOOST_TEST(bitwise_equal(restored_state(c, path, &steps_done), state_of(e)));
      BOOST_TEST(steps_done == 3);

      const auto file = engine::read_safetensors(path);
      BOOST_TEST(file.tensors.at("fc1.weight").dtype == "F32");
      BOOST_TEST(file.tensors.at("fc1.weight.adam_m").dtype ==
                 (std::string(dtype) == "float16" ? "F16" : "F32"));
      BOOST_TEST(file.tensors.at("fc1.weight.adam_v").dtype == "F32");
      BOOST_TEST((file.tensors.at("fc1.weight").shape == std::vector<std::int64_t>{64, 32}));
      // One group of two replicas, one_per_group: no copies.
      BOOST_TEST(file.tensors.size() == plan.variables.size());
    }
  }
}

BOOST_AUTO_TEST_CASE(metadata_says_where_training_stands) {
  const auto dir = scratch("metadata");
  const auto c = tiny_config();
  const auto file = engine::read_safetensors(tiny_checkpoint(dir, c));
  const auto& m = file.metadata;
  BOOST_TEST(m.at("format") == "popkit-checkpoint");
  BOOST_TEST(m.at("step") == "3");
  BOOST_TEST(m.at("epoch") == "1");
  BOOST_TEST(m.at("data_position") == "64");
  BOOST_TEST(m.at("shuffle_seed") == "7");
  BOOST_TEST(m.at("config_hash") == "0123456789abcdef");
  BOOST_TEST(m.at("checksum") == fmt::format("{:08x}", checkpoint_checksum(file)));
  const auto loaded = read_checkpoint((dir / "ckpt.safetensors").string(), planner::build_plan(c),
                                      Restore::kEverything);
  BOOST_TEST(loaded.state.step == 3);
  BOOST_TEST(loaded.state.data.epoch == 1);
  BOOST_TEST(loaded.state.data.position == 64);
}

BOOST_AUTO_TEST_CASE(all_replicas_saves_every_replicas_copy) {
  const auto dir = scratch("all_replicas");
  const auto c = tiny_config({"variables.retrieval_mode=all_replicas"});
  const auto path = tiny_checkpoint(dir, c);
  const auto file = engine::read_safetensors(path);
  BOOST_TEST(file.tensors.count("fc1.weight@replica1") == 1);
  BOOST_TEST(file.tensors.count("fc1.weight.adam_v@replica1") == 1);
  BOOST_TEST(file.metadata.at("copies") == "replica");
  // Replicas of one group hold the same values.
  BOOST_TEST(file.tensors.at("fc1.weight").data == file.tensors.at("fc1.weight@replica1").data);
  // Restores, and also into the default one_per_group plan.
  BOOST_TEST(restored_state(c, path) == restored_state(tiny_config(), path));
}

BOOST_AUTO_TEST_CASE(groups_keep_their_own_values) {
  const auto dir = scratch("groups");
  // Two groups of one replica: each trains on its own data and holds its own values.
  const auto c = tiny_config({"replication.groupings.everyone.group_size=1"});
  const planner::Plan plan = planner::build_plan(c);
  BOOST_REQUIRE(plan.variables_grouping.n_groups() == 2);
  engine::Engine e(plan, two_threads());
  e.initialize();
  train_steps(e, engine::load_dataset(c, engine::Split::kTrain), 2);
  const std::string path = (dir / "ckpt.safetensors").string();
  save_checkpoint(path, e, some_state(c));
  const auto file = engine::read_safetensors(path);
  BOOST_TEST(file.tensors.count("fc1.weight@group1") == 1);
  BOOST_TEST(file.tensors.at("fc1.weight").data != file.tensors.at("fc1.weight@group1").data);
  BOOST_TEST(bitwise_equal(restored_state(c, path), state_of(e)));
}

BOOST_AUTO_TEST_CASE(weights_from_elsewhere_without_metadata) {
  // A file as PyTorch's safetensors.save_file writes it: tensors by name, no metadata.
  const auto dir = scratch("elsewhere");
  const auto c = tiny_config();
  auto file = engine::read_safetensors(tiny_checkpoint(dir, c));
  file.metadata.clear();
  for (auto it = file.tensors.begin(); it != file.tensors.end();)
    it = it->first.find(".adam_") != std::string::npos ? file.tensors.erase(it) : std::next(it);
  const std::string path = (dir / "weights.safetensors").string();
  engine::write_safetensors(path, file);
  const planner::Plan plan = planner::build_plan(c);
  const auto loaded = read_checkpoint(path, plan, Restore::kWeights);
  BOOST_TEST(!loaded.has_state);
  engine::Engine e(plan, two_threads());
  e.initialize();
  restore_checkpoint(e, loaded, path, Restore::kWeights);
  const auto& w = file.tensors.at("fc2.weight");
  std::vector<float> want(w.data.size() / 4);
  std::memcpy(want.data(), w.data.data(), w.data.size());
  BOOST_TEST(e.read_variable("fc2.weight") == want);
  // Resuming needs the step and data position only a poprun checkpoint has.
  BOOST_TEST(error_of([&] { read_checkpoint(path, plan, Restore::kEverything); }) ==
             path +
                 ": not a popkit checkpoint (no 'popkit-checkpoint' metadata): resuming "
                 "needs the step and data position a poprun checkpoint holds; start from its "
                 "weights with --init-from instead");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(checkpoint_errors)

BOOST_AUTO_TEST_CASE(missing_file) {
  const auto plan = planner::build_plan(tiny_config());
  BOOST_TEST(error_of([&] {
               read_checkpoint("/nonexistent/ckpt.safetensors", plan, Restore::kWeights);
             }) == "/nonexistent/ckpt.safetensors: no such file");
}

BOOST_AUTO_TEST_CASE(directory_is_refused) {
  const auto dir = scratch("directory");
  const auto plan = planner::build_plan(tiny_config());
  BOOST_TEST(error_of([&] { read_checkpoint(dir.string(), plan, Restore::kWeights); }) ==
             dir.string() + ": is a directory; expected a safetensors checkpoint");
}

// /dev/zero never ends and a FIFO without a writer blocks: both are refused from the
// descriptor's type, before any byte is read.
BOOST_AUTO_TEST_CASE(device_is_refused) {
  const auto plan = planner::build_plan(tiny_config());
  BOOST_TEST(error_of([&] { read_checkpoint("/dev/zero", plan, Restore::kWeights); }) ==
             "/dev/zero: is not a regular file (a character device); expected a safetensors "
             "checkpoint");
}

BOOST_AUTO_TEST_CASE(fifo_is_refused_without_blocking) {
  const auto dir = scratch("fifo");
  const std::string fifo = (dir / "ckpt.safetensors").string();
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto plan = planner::build_plan(tiny_config());
  BOOST_TEST(error_of([&] { read_checkpoint(fifo, plan, Restore::kEverything); }) ==
             fifo + ": is not a regular file (a FIFO); expected a safetensors checkpoint");
}

// A shape whose element count wraps to 0 in 64 bits must not pass as an empty tensor.
BOOST_AUTO_TEST_CASE(shape_beyond_64_bits) {
  const auto dir = scratch("shape_overflow");
  const std::string path = write_raw_safetensors(
      dir / "t.safetensors",
      R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})");
  BOOST_TEST(safetensors_error(path) ==
             path + ": tensor t: shape [4294967296, 4294967296] of F32 needs more than 2^64 bytes");
}

// Dimensions and offsets are JSON integers: a float such as 1e30 is not converted.
BOOST_AUTO_TEST_CASE(shape_and_offsets_must_be_integers) {
  const auto dir = scratch("shape_float");
  std::string path = write_raw_safetensors(
      dir / "a.safetensors", R"({"t":{"dtype":"F32","shape":[1e30],"data_offsets":[0,4]}})",
      std::vector<char>(4));
  BOOST_TEST(safetensors_error(path) ==
             path + ": tensor t: shape is [1e+30], not a list of integers >= 0");
  path = write_raw_safetensors(dir / "b.safetensors",
                               R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",
                               std::vector<char>(4));
  BOOST_TEST(safetensors_error(path) ==
             path + ": tensor t: data_offsets is [-4,0], not two integers >= 0");
}

// Every value a run loads must be finite: NaN weights pass a ReLU as 0 and train on
// silently, and an Inf weight gives a NaN loss.
BOOST_AUTO_TEST_CASE(non_finite_values_are_refused) {
  const auto dir = scratch("non_finite");
  const auto c = tiny_config();
  const auto plan = planner::build_plan(c);
  const auto path = tiny_checkpoint(dir, c);
  rewrite_checkpoint(path, [](engine::SafeTensorsFile& f) {
    auto& w = f.tensors.at("fc1.weight");
    for (std::size_t i = 0; i < 64 * 32; ++i)
      set_float(w, i, std::numeric_limits<float>::quiet_NaN());
  });
  for (const Restore what : {Restore::kWeights, Restore::kEverything})
    BOOST_TEST(error_of([&] { read_checkpoint(path, plan, what); }) ==
               path + ": tensor fc1.weight: 2048 of 2048 values are not finite (NaN or Inf)");

  fs::create_directories(dir / "one");
  const auto one = tiny_checkpoint(dir / "one", c);
  rewrite_checkpoint(one, [](engine::SafeTensorsFile& f) {
    set_float(f.tensors.at("fc2.weight"), 5, std::numeric_limits<float>::infinity());
  });
  BOOST_TEST(error_of([&] { read_checkpoint(one, plan, Restore::kWeights); }) ==
             one + ": tensor fc2.weight: 1 of 1024 values are not finite (NaN or Inf)");
}

// Optimizer state is checked when it is restored (resume), in float16 too; init_from
// and eval ignore it.
BOOST_AUTO_TEST_CASE(non_finite_optimizer_state_is_refused_on_resume) {
  const auto dir = scratch("non_finite_f16");
  const auto c = tiny_config({"training.optimizer.first_order_dtype=float16"});
  const auto plan = planner::build_plan(c);
  const auto path = tiny_checkpoint(dir, c);
  rewrite_checkpoint(path, [](engine::SafeTensorsFile& f) {
    auto& m = f.tensors.at("fc3.weight.adam_m");
    BOOST_REQUIRE(m.dtype == "F16");
    const std::uint16_t inf = 0x7C00, nan = 0x7E00;  // float16 +Inf and a quiet NaN
    std::memcpy(m.data.data() + 2 * 7, &inf, 2);
    std::memcpy(m.data.data() + 2 * 9, &nan, 2);
  });
  BOOST_TEST(error_of([&] { read_checkpoint(path, plan, Restore::kEverything); }) ==
             path + ": tensor fc3.weight.adam_m: 2 of 320 values are not finite (NaN or Inf)");
  BOOST_TEST(error_of([&] { read_checkpoint(path, plan, Restore::kWeights); }) == "");
}

// A second moment is a mean of squares: a negative one would make Adam's sqrt(v) NaN.
BOOST_AUTO_TEST_CASE(negative_second_moment_is_refused) {
  const auto dir = scratch("negative_v");
  const auto c = tiny_config();
  const auto path = tiny_checkpoint(dir, c);
  rewrite_checkpoint(path, [](engine::SafeTensorsFile& f) {
    set_float(f.tensors.at("fc1.bias.adam_v"), 0, -1.0f);
  });
  BOOST_TEST(error_of([&] {
               read_checkpoint(path, planner::build_plan(c), Restore::kEverything);
             }) == path +
                       ": tensor fc1.bias.adam_v: 1 of 32 values are negative (a second "
                       "moment is >= 0)");
}

// F64 weights (from elsewhere) must be finite once converted to float32.
BOOST_AUTO_TEST_CASE(f64_values_beyond_float32_are_refused) {
  const auto dir = scratch("f64_range");
  const auto c = tiny_config();
  auto file = engine::read_safetensors(tiny_checkpoint(dir, c));
  file.metadata.clear();
  auto& w = file.tensors.at("fc3.bias");
  engine::SafeTensor d;
  d.dtype = "F64";
  d.shape = w.shape;
  d.data.resize(w.data.size() * 2);
  const double big = 1e300;
  std::memcpy(d.data.data() + 8 * 3, &big, 8);
  w = d;
  const std::string path = (dir / "f64.safetensors").string();
  engine::write_safetensors(path, file);
  BOOST_TEST(error_of([&] { read_checkpoint(path, planner::build_plan(c), Restore::kWeights); }) ==
             path + ": tensor fc3.bias: 1 of 10 values are not finite (NaN or Inf) as float32");
}

// Metadata as a buggy or foreign writer could leave it, with a checksum that fits: every
// field is checked for its range, alone and against the others. some_state: step 3,
// epoch 1, data_position 64, global_batch_size 32, n_train 512; R = 2 in one group.
BOOST_AUTO_TEST_CASE(metadata_out_of_range_is_refused) {
  const auto dir = scratch("metadata_ranges");
  const auto c = tiny_config();
  const auto plan = planner::build_plan(c);
  const auto good = file_bytes(tiny_checkpoint(dir, c));
  const std::string path = (dir / "bad.safetensors").string();
  struct Case {
    std::map<std::string, std::string> set;
    std::string want;  // after "PATH: checkpoint metadata "
  };
  const std::vector<Case> cases = {
      {{{"data_position", "1000000000000"}},
       "'data_position' is 1000000000000, out of range 0 to 480 (n_train 512 - "
       "global_batch_size 32: a position leaves room for a global batch)"},
      {{{"data_position", "-32"}},
       "'data_position' is -32, out of range 0 to 480 (n_train 512 - global_batch_size 32: a "
       "position leaves room for a global batch)"},
      {{{"step", "0"}, {"epoch", "0"}},
       "'data_position' is 64, out of range 0 to 0 (step 0: no sample consumed yet)"},
      {{{"global_batch_size", "0"}},
       "'global_batch_size' is 0, out of range 1 to 512 (n_train: a global batch fits in an "
       "epoch)"},
      {{{"global_batch_size", "513"}},
       "'global_batch_size' is 513, out of range 1 to 512 (n_train: a global batch fits in an "
       "epoch)"},
      {{{"n_train", "0"}}, "'n_train' is 0, out of range 1 to 9007199254740992"},
      {{{"step", "4611686018427387904"}},
       "'step' is 4611686018427387904, out of range 0 to 9007199254740992"},
      {{{"step", "-1"}}, "'step' is -1, out of range 0 to 9007199254740992"},
      {{{"step", "3.5"}}, "'step' is '3.5', not an integer"},
      {{{"epoch", "5"}},
       "'epoch' is 5, out of range 0 to 2 (step 3 at data_position 64: each epoch begun, and "
       "a position inside one, is reached by a step)"},
      {{{"epoch", "3"}},
       "'epoch' is 3, out of range 0 to 2 (step 3 at data_position 64: each epoch begun, and "
       "a position inside one, is reached by a step)"},
      {{{"shuffle", "yes"}}, "'shuffle' is 'yes', not true or false"},
      {{{"shuffle_seed", "-1"}},
       "'shuffle_seed' is '-1', not an integer from 0 to 18446744073709551615"},
      {{{"shuffle_rng", "mt19937"}},
       "'shuffle_rng' is 'mt19937', but this build shuffles with 'splitmix64 Fisher-Yates of "
       "(shuffle_seed, epoch)': the data order would differ"},
      {{{"replication_factor", "0"}},
       "'replication_factor' is 0, out of range 1 to 9007199254740992"},
      {{{"n_groups", "3"}}, "'n_groups' is 3, not a divisor of replication_factor 2"},
      {{{"copies", "some"}}, "'copies' is 'some', not one, group or replica"},
      {{{"n_copies", "2"}}, "'n_copies' is 2, but copies 'one' means 1"},
      {{{"copies", "replica"}}, "'n_copies' is 1, but copies 'replica' means 2"},
      {{{"config", "[1]"}}, "'config' is not the JSON object of a config"},
      {{{"config", "{"}}, "'config' is not the JSON object of a config"},
      {{{"format_version", "0"}}, "'format_version' is 0, out of range 1 to 1"},
      {{{"config_hash", "xyz"}}, "'config_hash' is 'xyz', not 16 hex digits"},
  };
  for (const Case& k : cases) {
    BOOST_TEST_CONTEXT(k.want) {
      write_bytes(path, good);
      rewrite_checkpoint(path, [&k](engine::SafeTensorsFile& f) {
        for (const auto& [key, value] : k.set) f.metadata[key] = value;
      });
      for (const Restore what : {Restore::kEverything, Restore::kWeights})
        BOOST_TEST(error_of([&] { read_checkpoint(path, plan, what); }) ==
                   path + ": checkpoint metadata " + k.want);
    }
  }
  write_bytes(path, good);
  rewrite_checkpoint(path, [](engine::SafeTensorsFile& f) { f.metadata.erase("shuffle_rng"); });
  BOOST_TEST(error_of([&] { read_checkpoint(path, plan, Restore::kEverything); }) ==
             path + ": checkpoint metadata has no 'shuffle_rng'");
  // Copies the metadata does not announce.
  write_bytes(path, good);
  rewrite_checkpoint(path, [](engine::SafeTensorsFile& f) {
    f.tensors.emplace("fc1.weight@group1", f.tensors.at("fc1.weight"));
  });
  BOOST_TEST(error_of([&] { read_checkpoint(path, plan, Restore::kEverything); }) ==
             path +
                 ": tensor fc1.weight@group1 is group copy 1, but the metadata says copies "
                 "'one' (n_copies 1)");
}

// Seeds are unsigned 64-bit (training.seed): the largest one round-trips.
BOOST_AUTO_TEST_CASE(largest_shuffle_seed_round_trips) {
  const auto dir = scratch("seed_round_trip");
  const auto c = tiny_config();
  const planner::Plan plan = planner::build_plan(c);
  engine::Engine e(plan, two_threads());
  e.initialize();
  CheckpointState state = some_state(c);
  state.shuffle_seed = std::numeric_limits<std::uint64_t>::max();
  const std::string path = (dir / "ckpt.safetensors").string();
  save_checkpoint(path, e, state);
  const std::string why = error_of([&] {
    BOOST_TEST(read_checkpoint(path, plan, Restore::kEverything).state.shuffle_seed ==
               std::numeric_limits<std::uint64_t>::max());
  });
  BOOST_TEST(why == "");
}

BOOST_AUTO_TEST_CASE(truncated_file) {
  const auto dir = scratch("truncated");
  const auto c = tiny_config();
  const auto path = tiny_checkpoint(dir, c);
  auto bytes = file_bytes(path);
  bytes.resize(bytes.size() - 100);
  write_bytes(path, bytes);
  const std::string why =
      error_of([&] { read_checkpoint(path, planner::build_plan(c), Restore::kEverything); });
  BOOST_TEST(why.rfind(path + ": ", 0) == 0);
  BOOST_TEST(why.find("truncated") != std::string::npos, why);
  // Cut inside the header too.
  bytes.resize(40);
  write_bytes(path, bytes);
  const std::string header =
      error_of([&] { read_checkpoint(path, planner::build_plan(c), Restore::kEverything); });
  BOOST_TEST(header.find("truncated") != std::string::npos, header);
}

BOOST_AUTO_TEST_CASE(tampered_data_fails_the_checksum) {
  const auto dir = scratch("tampered");
  const auto c = tiny_config();
  const auto path = tiny_checkpoint(dir, c);
  auto bytes = file_bytes(path);
  bytes[bytes.size() - 7] ^= 0x10;  // a bit of the last tensor's data
  write_bytes(path, bytes);
  const std::string why =
      error_of([&] { read_checkpoint(path, planner::build_plan(c), Restore::kWeights); });
  BOOST_TEST(why.rfind(path + ": checksum mismatch: the metadata says ", 0) == 0, why);
  BOOST_TEST(why.find("the file was modified or damaged") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(tampered_metadata_fails_the_checksum) {
  const auto dir = scratch("tampered_metadata");
  const auto c = tiny_config();
  const auto path = tiny_checkpoint(dir, c);
  auto bytes = file_bytes(path);
  std::string text(bytes.begin(), bytes.end());
  const auto at = text.find("\"step\":\"3\"");
  BOOST_REQUIRE(at != std::string::npos);
  text[at + 8] = '9';  // same length: the header stays well formed
  write_bytes(path, std::vector<char>(text.begin(), text.end()));
  const std::string why =
      error_of([&] { read_checkpoint(path, planner::build_plan(c), Restore::kEverything); });
  BOOST_TEST(why.rfind(path + ": checksum mismatch", 0) == 0, why);
}

BOOST_AUTO_TEST_CASE(shape_mismatch_names_the_tensor_and_both_shapes) {
  const auto dir = scratch("shape_mismatch");
  const auto path = tiny_checkpoint(dir, tiny_config());
  // The same layer names, but fc1 of 16 outputs instead of 32.
  auto c = tiny_config();
  c.model.layers[0].attributes.set("out_features", 16);
  const std::string why =
      error_of([&] { read_checkpoint(path, planner::build_plan(c), Restore::kWeights); });
  BOOST_TEST(why.rfind(path + ": does not match the model: tensor fc1.bias has shape [32], the "
                              "model's fc1.bias is [16]",
                       0) == 0,
             why);
}

BOOST_AUTO_TEST_CASE(name_mismatch_lists_missing_and_unexpected) {
  const auto dir = scratch("name_mismatch");
  const auto path = tiny_checkpoint(dir, tiny_config());
  auto c = tiny_config();
  c.model.layers[2].name = "head";
  const std::string why =
      error_of([&] { read_checkpoint(path, planner::build_plan(c), Restore::kWeights); });
  BOOST_TEST(why == path +
                        ": does not match the model 'tiny': the model's head.weight, head.bias "
                        "missing; fc3.bias, fc3.bias.adam_m, fc3.bias.adam_v, fc3.weight, "
                        "fc3.weight.adam_m, fc3.weight.adam_v not in the model");
}

BOOST_AUTO_TEST_CASE(not_safetensors) {
  const auto dir = scratch("not_safetensors");
  const std::string path = (dir / "ckpt.safetensors").string();
  const std::string text = "this is not a checkpoint at all";
  write_bytes(path, std::vector<char>(text.begin(), text.end()));
  const std::string why = error_of(
      [&] { read_checkpoint(path, planner::build_plan(tiny_config()), Restore::kWeights); });
  BOOST_TEST(why.rfind(path + ": truncated or not safetensors", 0) == 0, why);
}

BOOST_AUTO_TEST_SUITE_END()
