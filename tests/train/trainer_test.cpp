// The training driver on the tiny synthetic config: resume ends bitwise identical to an
// uninterrupted run (also under another sharding threshold or execution mode), limits,
// notes, init_from and eval, signals, bad output folders and data, and run files that
// validate against schemas/run.schema.json.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "base/output_file.h"
#include "config/layer_kinds.h"
#include "engine/io/safetensors.h"
#include "helpers.h"
#include "planner/build.h"
#include "runner/checkpoint.h"
#include "runner/commands.h"
#include "runner/resolved_config.h"

using namespace popkit;
using namespace popkit::runner;
using namespace popkit::runner::testing;

namespace {

// tiny.yaml: 512 samples, global batch 8 x 2 x 2 = 32: 16 steps per epoch, 2 epochs.
constexpr std::int64_t kStepsPerEpoch = 16;

TrainOptions steps(std::int64_t n) {
  TrainOptions o;
  o.steps = n;
  return o;
}

std::function<bool()> stop_after(std::int64_t* counter, std::int64_t k) {
  return [counter, k] { return ++*counter >= k; };
}

std::string checkpoint_at(const fs::path& dir, std::int64_t step) {
  return (dir / fmt::format("checkpoint-step{}.safetensors", step)).string();
}

int validate_run_file(const std::string& file) {
  const std::string cmd = std::string(POPKIT_PYTHON) + " " + POPKIT_SOURCE_DIR +
                          "/tests/reports/validate_run_file.py " + POPKIT_SOURCE_DIR +
                          "/schemas/run.schema.json " + file;
  return std::system(cmd.c_str());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(resume)

// Interrupt after k steps (mid-epoch, at an epoch's end), resume, and compare the final
// checkpoint's bytes with those of the uninterrupted run: metadata included.
BOOST_AUTO_TEST_CASE(interrupted_and_resumed_ends_bitwise_identical) {
  const auto c = tiny_config();
  const auto whole = scratch("resume_whole");
  const TrainResult full = run(c, {}, whole);
  BOOST_REQUIRE(full.steps == 2 * kStepsPerEpoch);
  const auto want = file_bytes(full.checkpoint);
  for (const std::int64_t k : {std::int64_t{5}, kStepsPerEpoch, std::int64_t{21}}) {
    BOOST_TEST_CONTEXT("interrupted after " << k << " steps") {
      const auto dir = scratch(fmt::format("resume_k{}", k));
      std::int64_t counter = 0;
      TrainOptions first;
      first.stop_requested = stop_after(&counter, k);
      const TrainResult part = run(c, first, dir / "a");
      BOOST_TEST(part.interrupted);
      BOOST_TEST(part.steps == k);
      BOOST_TEST(part.checkpoint == checkpoint_at(dir / "a", k));
      BOOST_TEST(!part.test);
      TrainOptions second;
      second.resume = part.checkpoint;
      const TrainResult rest = run(c, second, dir / "b");
      BOOST_TEST(!rest.interrupted);
      BOOST_TEST(rest.steps == 2 * kStepsPerEpoch);
      BOOST_TEST((file_bytes(rest.checkpoint) == want));
      BOOST_TEST(rest.test->correct == full.test->correct);
      BOOST_TEST(rest.test->loss == full.test->loss);
    }
  }
}

// A stop request within a step (one process) abandons the step while no optimizer op of
// it has run: the checkpoint holds the step before, and resuming from it ends on the
// uninterrupted run's checkpoint byte for byte. The request comes at the k-th op polled,
// from the first op of the run (a checkpoint of step 0) to about the last before step
// 2's update, under each way a step runs: phased, standard, io_overlapped with the IO
// thread, and pipelined (stage workers). A request the engine sees after an update began
// finishes the step (the resume suite's other cases).
BOOST_AUTO_TEST_CASE(a_stop_within_a_step_abandons_it_and_resumes_bitwise) {
  const std::vector<std::vector<std::string>> ways = {
      {},
      {"execution.mode=standard", "remote.weights=false"},
      {"execution.io_mode=io_overlapped", "execution.io_tiles=32"},
      {"pipeline.stages=2", "execution.mode=standard", "training.gradient_accumulation=4",
       "remote.weights=false", "remote.optimizer_state=false"}};
  constexpr std::int64_t kSteps = 3;
  for (const auto& way : ways) {
    const std::string name = way.empty() ? "phased" : way.front();
    BOOST_TEST_CONTEXT(name) {
      const auto c = tiny_config(way);
      const auto dir = scratch("stop_within_" + name);
      TrainOptions plain = steps(kSteps);
      plain.io_overlap = engine::IoOverlap::kThread;
      // The polls of a run of n steps: its steps' and its final evaluation's (which
      // polls too), so a step's number is the difference of two runs' over their steps.
      std::vector<char> want;
      const auto polls_of = [&](std::int64_t n, const char* sub) {
        std::atomic<std::int64_t> polls{0};
        TrainOptions count = steps(n);
        count.io_overlap = plain.io_overlap;
        count.stop_within_step = [&polls] {
          ++polls;
          return false;
        };
        const TrainResult full = run(c, count, dir / sub);
        if (n == kSteps) want = file_bytes(full.checkpoint);
        return polls.load();
      };
      const std::int64_t per_step =
          (polls_of(2 * kSteps, "double") - polls_of(kSteps, "full")) / kSteps;
      BOOST_REQUIRE(per_step > 2);
      for (const std::int64_t k : {std::int64_t{1}, per_step / 2, per_step, 2 * per_step}) {
        BOOST_TEST_CONTEXT("stopped at poll " << k << " of " << per_step << " a step") {
          std::atomic<std::int64_t> n{0};
          TrainOptions first = plain;
          first.stop_within_step = [&n, k] { return ++n >= k; };
          first.stop_requested = [&n, k] { return n.load() >= k; };
          std::ostringstream log;
          const TrainResult part = run(c, first, dir / fmt::format("a{}", k), log);
          BOOST_TEST(part.interrupted);
          // The steps taken before the stop: a step's polls end when a replica begins its
          // update, so their number varies with the threads' timing by a few.
          const std::int64_t step = part.steps;
          BOOST_TEST(step < kSteps);
          if (k <= per_step / 2) BOOST_TEST(step == 0);
          if (k > per_step + 2) BOOST_TEST(step >= 1);
          BOOST_TEST(part.checkpoint == checkpoint_at(dir / fmt::format("a{}", k), step));
          BOOST_TEST(log.str().find(fmt::format("step {} stopped before its update; the "
                                                "checkpoint holds step {}",
                                                step + 1, step)) != std::string::npos,
                     log.str());
          BOOST_TEST(validate_run_file(part.run_file) == 0);
          TrainOptions second = plain;
          second.resume = part.checkpoint;
          const TrainResult rest = run(c, second, dir / fmt::format("b{}", k));
          BOOST_TEST(rest.steps == kSteps);
          BOOST_TEST((file_bytes(rest.checkpoint) == want));
        }
      }
    }
  }
}

// --steps counts the whole run: a run stopped by --steps 7 and resumed with --steps 12
// stops where a run with --steps 12 stops.
BOOST_AUTO_TEST_CASE(steps_count_the_whole_run) {
  const auto c = tiny_config();
  const auto dir = scratch("resume_steps");
  TrainOptions twelve;
  twelve.steps = 12;
  const TrainResult full = run(c, twelve, dir / "full");
  TrainOptions seven;
  seven.steps = 7;
  const TrainResult part = run(c, seven, dir / "a");
  BOOST_TEST(part.steps == 7);
  TrainOptions rest = twelve;
  rest.resume = part.checkpoint;
  const TrainResult resumed = run(c, rest, dir / "b");
  BOOST_TEST(resumed.steps == 12);
  BOOST_TEST(resumed.first_step == 7);
  BOOST_TEST((file_bytes(resumed.checkpoint) == file_bytes(full.checkpoint)));
  // The run file carries the whole run: the earlier run's 7 steps, then this one's 5, so
  // its losses are those of the uninterrupted run, bit for bit.
  const auto& rec = resumed.record;
  BOOST_TEST(rec.loss.size() == 12u);
  BOOST_TEST(rec.step_seconds.size() == 12u);
  BOOST_TEST(rec.first_step == 0);
  BOOST_TEST(rec.loss == full.record.loss);
  BOOST_TEST((std::vector<double>(rec.step_seconds.begin(), rec.step_seconds.begin() + 7) ==
              part.record.step_seconds));
  BOOST_REQUIRE(rec.resumed_from.has_value());
  BOOST_TEST(rec.resumed_from->run_dir == (dir / "a").string());
  BOOST_TEST(rec.resumed_from->run_file == (dir / "a" / "run.json").string());
  BOOST_TEST(rec.resumed_from->checkpoint == part.checkpoint);
  BOOST_TEST(rec.resumed_from->step == 7);
  BOOST_TEST(rec.run_dir == (dir / "b").string());
  BOOST_TEST(validate_run_file(resumed.run_file) == 0);
  // Without the earlier run file the history is missing, and the file says from where.
  fs::remove(dir / "a" / "run.json");
  std::ostringstream log;
  const TrainResult bare = run(c, rest, dir / "c", log);
  BOOST_TEST(bare.record.loss.size() == 5u);
  BOOST_TEST(bare.record.first_step == 7);
  BOOST_TEST(bare.record.resumed_from->run_file.empty());
  BOOST_TEST(log.str().find("the run file starts at step 8") != std::string::npos, log.str());
  BOOST_TEST(validate_run_file(bare.run_file) == 0);
}

// Checkpoints hold full tensors: another sharding threshold or execution mode resumes to
// the same values, bit for bit (the engine's equivalence); only the config hash differs.
BOOST_AUTO_TEST_CASE(resumes_under_another_threshold_or_mode) {
  const auto c = tiny_config();
  const auto dir = scratch("resume_other");
  const TrainResult full = run(c, {}, dir / "full");
  const auto want = engine::read_safetensors(full.checkpoint);
  std::int64_t counter = 0;
  TrainOptions first;
  first.stop_requested = stop_after(&counter, 9);
  const TrainResult part = run(c, first, dir / "a");
  const std::vector<std::vector<std::string>> changes = {
      {"sharding.threshold=100000"}, {"execution.mode=standard", "remote.weights=false"}};
  for (const auto& change : changes) {
    BOOST_TEST_CONTEXT(change.front()) {
      TrainOptions second;
      second.resume = part.checkpoint;
      std::ostringstream log;
      const TrainResult rest = run(tiny_config(change), second, dir / change.front(), log);
      const auto got = engine::read_safetensors(rest.checkpoint);
      BOOST_TEST(got.tensors.size() == want.tensors.size());
      for (const auto& [name, t] : want.tensors)
        BOOST_TEST((got.tensors.at(name).data == t.data), name);
      BOOST_TEST(got.metadata.at("step") == want.metadata.at("step"));
      BOOST_TEST(log.str().find("was written under a different config") != std::string::npos);
    }
  }
}

// One replica with micro-batch 16 sees the same global batches as two with 8: the run
// resumes and continues from the same data position; values agree to float rounding.
BOOST_AUTO_TEST_CASE(resumes_under_another_replication_factor) {
  const auto c = tiny_config();
  const auto dir = scratch("resume_replicas");
  const TrainResult full = run(c, {}, dir / "full");
  std::int64_t counter = 0;
  TrainOptions first;
  first.stop_requested = stop_after(&counter, 9);
  const TrainResult part = run(c, first, dir / "a");
  TrainOptions second;
  second.resume = part.checkpoint;
  const TrainResult rest =
      run(tiny_config({"replication.factor=1", "replication.groupings.everyone.group_size=1",
                       "training.micro_batch_size=16"}),
          second, dir / "b");
  BOOST_TEST(rest.steps == full.steps);
  const auto got = engine::read_safetensors(rest.checkpoint);
  const auto want = engine::read_safetensors(full.checkpoint);
  BOOST_TEST(got.metadata.at("data_position") == want.metadata.at("data_position"));
  BOOST_TEST(got.metadata.at("epoch") == want.metadata.at("epoch"));
  // Summation order differs (one replica instead of a mean of two); after 23 Adam steps
  // the weights stay within 1e-3 of each other.
  const auto& a = got.tensors.at("fc1.weight").data;
  const auto& b = want.tensors.at("fc1.weight").data;
  BOOST_REQUIRE(a.size() == b.size());
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); i += 4) {
    float x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    worst = std::max(worst, std::abs(x - y));
  }
  BOOST_TEST(worst < 1e-3f);
}

// A resume continues the same training: a checkpoint of a config that trains otherwise
// is refused before any folder is made, naming the keys that differ (the global batch
// too) and the config beside it.
BOOST_AUTO_TEST_CASE(refuses_a_checkpoint_of_another_training) {
  const auto dir = scratch("resume_other_training");
  const TrainResult part = run(tiny_config(), steps(4), dir / "a");
  TrainOptions more = steps(8);
  more.resume = part.checkpoint;
  const std::string why = error_of([&] {
    run(tiny_config({"training.optimizer.lr=0.5", "data.synthetic_noise=0.2"}), more, dir / "b");
  });
  BOOST_TEST(why == part.checkpoint +
                        " was written under another config: data.synthetic_noise (1.5 there, 0.2 "
                        "here), training.optimizer.lr (0.01 there, 0.5 here); a resumed run "
                        "continues the same training (only how long it runs, where tensors live "
                        "and how replicas split the global batch may change): resume with the "
                        "config that wrote it (" +
                        (dir / "a" / "config.yaml").string() +
                        "), or start from its weights alone with --init-from " + part.checkpoint,
             why);
  BOOST_TEST(!fs::exists(dir / "b"));
  const std::string why2 =
      error_of([&] { run(tiny_config({"training.micro_batch_size=16"}), more, dir / "b"); });
  BOOST_TEST(why2.find(" was written under another config: the global batch (micro_batch_size x "
                       "gradient_accumulation x replication.factor) (32 there, 64 here); ") !=
                 std::string::npos,
             why2);
}

// Steps and epochs count the whole run: a limit below the checkpoint is refused; at it,
// nothing is trained and no folder is made.
BOOST_AUTO_TEST_CASE(a_limit_below_or_at_the_checkpoint) {
  const auto c = tiny_config();
  const auto dir = scratch("resume_limits");
  const TrainResult part = run(c, steps(kStepsPerEpoch), dir / "a");
  TrainOptions fewer = steps(5);
  fewer.resume = part.checkpoint;
  BOOST_TEST(error_of([&] { run(c, fewer, dir / "b"); }) ==
             part.checkpoint +
                 " is at step 16, past this run's end (--steps 5): steps and epochs count the "
                 "whole run, a resumed one too: give more to train on");
  BOOST_TEST(!fs::exists(dir / "b"));
  for (const auto& [limit, said] :
       {std::pair{steps(kStepsPerEpoch), "--steps 16"}, std::pair{TrainOptions{}, ""}}) {
    TrainOptions same = limit;
    same.resume = part.checkpoint;
    if (!same.steps) same.epochs = 1;
    const TrainResult done = run(c, same, dir / "c");
    BOOST_TEST(done.nothing_to_train == (*said ? said : "--epochs 1"));
    BOOST_TEST(done.steps == kStepsPerEpoch);
    BOOST_TEST(done.first_step == kStepsPerEpoch);
    BOOST_TEST(done.run_file.empty());
    BOOST_TEST(!fs::exists(dir / "c"));
  }
  // The config's two epochs go on from there.
  TrainOptions on;
  on.resume = part.checkpoint;
  BOOST_TEST(run(c, on, dir / "d").steps == 2 * kStepsPerEpoch);
}

// A checkpoint's step is where its epoch and position put it, over the data it claims:
// one forged to step 1,000,000 at epoch 0, taken over another number of samples, or in
// another order of them, is refused before anything is trained.
BOOST_AUTO_TEST_CASE(a_checkpoint_stands_where_its_schedule_puts_it) {
  const auto c = tiny_config();
  const auto dir = scratch("resume_forged");
  const TrainResult part = run(c, steps(5), dir / "a");
  const std::string forged = (dir / "forged.safetensors").string();
  const auto forge = [&](const std::string& key, const std::string& value) {
    fs::copy_file(part.checkpoint, forged, fs::copy_options::overwrite_existing);
    rewrite_checkpoint(forged, [&](engine::SafeTensorsFile& f) { f.metadata[key] = value; });
    TrainOptions o = steps(2000000);
    o.resume = forged;
    return error_of([&] { run(c, o, dir / "b"); });
  };
  BOOST_TEST(forge("step", "1000000") ==
             forged +
                 ": its metadata says step 1000000 at epoch 1, sample 160 of the epoch, but a run "
                 "of 16 global batches of 32 an epoch is there at step 5: no run of this data "
                 "and batch wrote it");
  BOOST_TEST(forge("data_position", "150") ==
             forged +
                 ": its metadata says step 5 at epoch 1, sample 150 of the epoch, but a run of 16 "
                 "global batches of 32 an epoch never stands there: no run of this data and "
                 "batch wrote it");
  BOOST_TEST(forge("n_train", "1024") ==
             forged +
                 " was taken over 1024 training samples, but this dataset has 512: the order of "
                 "the samples would not be its run's; resume on the data it was trained on");
  // The order it claims: data.shuffle and training.seed (7) of the config it was written under.
  BOOST_REQUIRE(c.data.shuffle);
  BOOST_TEST(forge("shuffle_seed", "8") ==
             forged +
                 ": its metadata says the samples were shuffled with seed 8, but the config it "
                 "was written under says shuffled with seed 7 (data.shuffle, training.seed): the "
                 "order of the samples would not be its run's");
  BOOST_TEST(forge("shuffle", "false") ==
             forged +
                 ": its metadata says the samples were not shuffled, but the config it was "
                 "written under says shuffled with seed 7 (data.shuffle, training.seed): the "
                 "order of the samples would not be its run's");
  BOOST_TEST(!fs::exists(dir / "b"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(trainer)

BOOST_AUTO_TEST_CASE(limits) {
  const auto dir = scratch("limits");
  TrainOptions o;
  o.steps = 5;
  BOOST_TEST(run(tiny_config(), o, dir / "steps").steps == 5);
  o = {};
  o.epochs = 1;
  BOOST_TEST(run(tiny_config(), o, dir / "epochs").steps == kStepsPerEpoch);
  // --steps past the config's epochs: steps win (epochs are not a limit then).
  o = {};
  o.steps = 40;
  const auto r = run(tiny_config(), o, dir / "past");
  BOOST_TEST(r.steps == 40);
  BOOST_TEST(r.data.epoch == 2);
  BOOST_TEST(r.data.position == 8 * 32);
}

BOOST_AUTO_TEST_CASE(epochs_near_two_to_the_63_do_not_overflow) {
  // epochs × steps per epoch passes 2^63: the limit saturates (the ubsan build aborts on
  // the signed overflow this once was) and the steps limit stops the run.
  const auto dir = scratch("huge_epochs");
  TrainOptions o;
  o.epochs = std::numeric_limits<std::int64_t>::max();
  o.steps = 3;
  BOOST_TEST(run(tiny_config(), o, dir).steps == 3);
}

BOOST_AUTO_TEST_CASE(drops_the_last_partial_batch_and_says_so) {
  const auto dir = scratch("partial");
  std::ostringstream log;
  TrainOptions o;
  o.steps = 1;
  run(tiny_config({"data.synthetic_train=500"}), o, dir, log);
  BOOST_TEST(log.str().find("note: each epoch uses 480 of the 500 training samples: the last 20 "
                            "do not fill a global batch of 32 (8 x 2 x 2) and are dropped\n") !=
                 std::string::npos,
             log.str());
}

BOOST_AUTO_TEST_CASE(evaluates_every_n_epochs) {
  const auto dir = scratch("eval_every");
  std::ostringstream log;
  const auto r = run(tiny_config({"eval.every=1"}), {}, dir, log);
  BOOST_TEST(log.str().find("epoch 1: test accuracy ") != std::string::npos, log.str());
  BOOST_TEST(log.str().find("epoch 2: test accuracy ") != std::string::npos, log.str());
  BOOST_REQUIRE(r.test.has_value());
  BOOST_TEST(r.test->n == 128);
  BOOST_TEST(r.test->accuracy > 0.3);  // ten classes: chance is 0.1
}

BOOST_AUTO_TEST_CASE(eval_and_init_from_use_the_checkpoint_weights) {
  const auto dir = scratch("init_from");
  const auto c = tiny_config();
  const TrainResult trained = run(c, {}, dir / "a");
  EvalOptions eval;
  eval.checkpoint = trained.checkpoint;
  eval.run_file = (dir / "eval.json").string();
  const EvalOutcome outcome = evaluate_checkpoint(c, eval);
  BOOST_TEST(outcome.test.correct == trained.test->correct);
  BOOST_TEST(outcome.test.loss == trained.test->loss);
  BOOST_TEST(validate_run_file(eval.run_file) == 0);
  // The run file of an evaluation: no training phases, the evaluation plan's measured.
  BOOST_TEST(outcome.record.phases.empty());
  BOOST_REQUIRE(outcome.record.eval.has_value());
  BOOST_TEST(outcome.record.eval->evaluations == 1);
  for (const auto& phase : outcome.record.eval->phases)
    for (const auto& m : phase.measured) BOOST_TEST(m.peak == phase.planned.peak, phase.name);

  // Starting from the trained weights with a fresh optimizer: the first step's loss is
  // the trained model's, far below a fresh start's.
  TrainOptions from;
  from.init_from = trained.checkpoint;
  from.steps = 1;
  const TrainResult warm = run(c, from, dir / "b");
  TrainOptions cold_options;
  cold_options.steps = 1;
  const TrainResult cold = run(c, cold_options, dir / "c");
  BOOST_TEST(warm.last_loss < 0.5 * cold.last_loss);
  // model.init_from in the config does the same.
  const TrainResult warm2 =
      run(tiny_config({"model.init_from=" + trained.checkpoint}), steps(1), dir / "d");
  BOOST_TEST(warm2.last_loss == warm.last_loss);
}

// A checkpoint trained under another config is refused, naming both; force evaluates it.
BOOST_AUTO_TEST_CASE(eval_refuses_a_checkpoint_of_another_config) {
  const auto dir = scratch("eval_other_config");
  const TrainResult trained = run(tiny_config(), steps(1), dir);
  EvalOptions eval;
  eval.checkpoint = trained.checkpoint;
  const auto other = tiny_config({"training.seed=8"});
  BOOST_CHECK_EXCEPTION(evaluate_checkpoint(other, eval), popkit::Error,
                        [&](const popkit::Error& e) {
                          const std::string what = e.what();
                          return what.find(config_hash(tiny_config())) != std::string::npos &&
                                 what.find(config_hash(other)) != std::string::npos &&
                                 what.find("give --force") != std::string::npos;
                        });
  eval.force = true;
  BOOST_TEST(evaluate_checkpoint(other, eval).test.n == 128);
}

// Finite weights can still overflow: evaluation fails on a non-finite loss, as training
// does, instead of printing "loss nan" with exit 0.
BOOST_AUTO_TEST_CASE(eval_fails_on_a_non_finite_loss) {
  const auto dir = scratch("eval_nan");
  const auto c = tiny_config();
  const TrainResult trained = run(c, steps(1), dir / "a");
  auto file = engine::read_safetensors(trained.checkpoint);
  file.metadata.clear();
  // Finite, but every logit overflows to +Inf, and softmax of Inf - Inf is NaN.
  auto& w = file.tensors.at("fc3.weight");
  const float huge = 3e38f;
  for (std::size_t i = 0; i < w.data.size(); i += 4) std::memcpy(&w.data[i], &huge, 4);
  const std::string path = (dir / "huge.safetensors").string();
  engine::write_safetensors(path, file);
  EvalOptions eval;
  eval.checkpoint = path;
  BOOST_TEST(error_of([&] { evaluate_checkpoint(c, eval); }) ==
             path + ": evaluation on synthetic test: the mean loss over the 128 samples is NaN");
}

BOOST_AUTO_TEST_CASE(unwritable_output_fails_before_training_and_damages_nothing) {
  const auto dir = scratch("unwritable");
  const TrainResult first = run(tiny_config(), steps(2), dir);
  const auto before = file_bytes(first.checkpoint);
  const auto blocker = dir / "a-file";
  write_bytes(blocker, {'x'});
  TrainOptions o;
  o.steps = 2;
  o.checkpoint_dir = (blocker / "sub").string();
  const std::string why = error_of([&] { run(tiny_config(), o, dir / "again"); });
  BOOST_TEST(
      why.rfind((blocker / "sub").string() + ": cannot create the checkpoint folder: ", 0) == 0,
      why);
  o = steps(2);
  o.run_file = (blocker / "run.json").string();
  const std::string why2 = error_of([&] { run(tiny_config(), o, dir); });
  BOOST_TEST(why2.rfind(blocker.string() + ": cannot create the run file folder: ", 0) == 0, why2);
  BOOST_TEST((file_bytes(first.checkpoint) == before));
}

BOOST_AUTO_TEST_CASE(bad_data_names_the_file) {
  const auto dir = scratch("bad_data");
  const std::string missing = (dir / "no-such-images.idx").string();
  const std::string why = error_of([&] {
    run(tiny_config({"data.dataset=idx", "model.input_shape=[28, 28]",
                     "data.train_images=" + missing, "data.train_labels=" + missing,
                     "data.test_images=" + missing, "data.test_labels=" + missing}),
        steps(1), dir);
  });
  BOOST_TEST(why.find(missing) != std::string::npos, why);
  // A corrupt file: not IDX.
  const std::string corrupt = (dir / "corrupt.idx").string();
  write_bytes(corrupt, std::vector<char>(100, 'z'));
  const std::string why2 = error_of([&] {
    run(tiny_config({"data.dataset=idx", "data.train_images=" + corrupt,
                     "data.train_labels=" + corrupt, "data.test_images=" + corrupt,
                     "data.test_labels=" + corrupt}),
        steps(1), dir);
  });
  BOOST_TEST(why2.find(corrupt) != std::string::npos, why2);
  // A header that claims far more images than the file holds: the file is wrong, not a
  // run too big for this machine.
  const std::string liar = (dir / "liar-images.idx").string();
  const std::string liar_labels = (dir / "liar-labels.idx").string();
  std::vector<char> header{
      0,  0, 8, 3, 0x3b, static_cast<char>(0x9a), static_cast<char>(0xca), 0, 0, 0, 0,
      28, 0, 0, 0, 28};  // 10^9 images of 28 x 28
  header.resize(16 + 784, 0);
  write_bytes(liar, header);
  write_bytes(liar_labels, {0, 0, 8, 1, 0x3b, static_cast<char>(0x9a), static_cast<char>(0xca), 0});
  const std::string why3 = error_of([&] {
    run(tiny_config({"data.dataset=idx", "model.input_shape=[28, 28]", "data.train_images=" + liar,
                     "data.train_labels=" + liar_labels, "data.test_images=" + liar,
                     "data.test_labels=" + liar_labels}),
        steps(1), dir);
  });
  BOOST_TEST(why3 == liar +
                         ": header says 1000000000 images of 28x28, more than the 4294967296 "
                         "bytes an IDX file may have",
             why3);
}

// Images must have the shape model.input_shape gives, not only as many pixels: 1x784
// images are not 28x28 ones.
BOOST_AUTO_TEST_CASE(image_shape_must_match_the_input_shape) {
  const auto dir = scratch("image_shape");
  const auto write = [&dir](const std::string& stem, std::int64_t rows, std::int64_t cols) {
    const engine::Dataset d = engine::make_synthetic(64, rows, cols, 1, 0.5);
    engine::write_idx_images((dir / (stem + "-images.idx")).string(), d);
    engine::write_idx_labels((dir / (stem + "-labels.idx")).string(), d);
    return std::vector<std::string>{"data.dataset=idx",
                                    "data.train_images=" + (dir / (stem + "-images.idx")).string(),
                                    "data.train_labels=" + (dir / (stem + "-labels.idx")).string(),
                                    "data.test_images=" + (dir / (stem + "-images.idx")).string(),
                                    "data.test_labels=" + (dir / (stem + "-labels.idx")).string()};
  };
  auto flat = write("flat", 1, 784);
  flat.push_back("model.input_shape=[28, 28]");
  BOOST_TEST(error_of([&] { run(tiny_config(flat), steps(1), dir); }) ==
             (dir / "flat-images.idx").string() +
                 ": images of shape [1, 784], but model.input_shape is [28, 28]");
  auto square = write("square", 28, 28);
  square.push_back("model.input_shape=[784]");
  BOOST_TEST(error_of([&] { run(tiny_config(square), steps(1), dir); }) ==
             (dir / "square-images.idx").string() +
                 ": images of shape [28, 28], but model.input_shape is [784]");
  // The same shape trains.
  square.back() = "model.input_shape=[28, 28]";
  BOOST_TEST(run(tiny_config(square), steps(1), dir).steps == 1);
}

BOOST_AUTO_TEST_CASE(invalid_config_exits_2_with_diagnostics) {
  std::ostringstream out, err;
  TrainCommand command;
  command.config = std::string(POPKIT_SOURCE_DIR) + "/tests/train/data/tiny.yaml";
  command.overrides = {"training.micro_batch_size=0"};
  BOOST_TEST(run_train_command(command, out, err) == 2);
  BOOST_TEST(err.str().find("error:") != std::string::npos, err.str());
  BOOST_TEST(err.str().find("training.micro_batch_size") != std::string::npos, err.str());
}

// A signal during training: the step finishes, a checkpoint is written, exit 130 with a
// line saying where; the checkpoint resumes.
BOOST_AUTO_TEST_CASE(sigterm_writes_a_checkpoint_and_exits_130) {
  const auto dir = scratch("sigterm");
  std::ostringstream out, err;
  TrainCommand command;
  command.config = std::string(POPKIT_SOURCE_DIR) + "/tests/train/data/tiny.yaml";
  command.options.run_file = (dir / "run.json").string();
  command.quiet = true;
  std::int64_t counter = 0;
  // The signal arrives during step 4; the handler only raises a flag.
  command.options.stop_requested = [&counter] {
    if (++counter == 4) std::raise(SIGTERM);
    return false;
  };
  BOOST_TEST(run_train_command(command, out, err) == kExitInterrupted);
  const std::string ckpt = checkpoint_at(dir, 4);
  BOOST_TEST(err.str().find("poprun: stopped by SIGTERM at step 4: checkpoint written to " +
                            ckpt) != std::string::npos,
             err.str());
  const auto loaded =
      read_checkpoint(ckpt, planner::build_plan(tiny_config()), Restore::kEverything);
  BOOST_TEST(loaded.state.step == 4);
  // The handler is gone again: the default action is back.
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  BOOST_TEST((now.sa_handler == SIG_DFL));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(run_file)

BOOST_AUTO_TEST_CASE(run_file_is_valid_and_holds_the_measurements) {
  const auto dir = scratch("run_file");
  TrainOptions o;
  o.checkpoint_every = 10;
  const TrainResult r = run(tiny_config(), o, dir);
  BOOST_TEST(r.run_file == (dir / "run.json").string());
  BOOST_TEST(validate_run_file(r.run_file) == 0);
  const auto& rec = r.record;
  BOOST_TEST(rec.loss.size() == 32u);
  BOOST_TEST(rec.step_seconds.size() == 32u);
  BOOST_TEST(rec.test.has_value());
  BOOST_TEST(rec.config["name"] == "tiny");
  BOOST_TEST(rec.throughput.median > 0);
  BOOST_REQUIRE(!rec.phases.empty());
  for (const auto& phase : rec.phases) {
    BOOST_TEST(phase.measured.size() == 2u);  // one per replica
    // What the engine measures is what the planner planned.
    for (const auto& m : phase.measured) BOOST_TEST(m.peak == phase.planned.peak, phase.name);
  }
  double compute = 0.0;
  for (const auto& phase : rec.phases) compute += phase.measured_by_kind.compute;
  BOOST_TEST(compute > 0.0);
  BOOST_TEST(rec.checkpoints.size() == 4u);  // steps 10, 20, 30 and the end, 32
  BOOST_TEST(rec.checkpoints.back().step == 32);
  BOOST_TEST(rec.bytes_measured.host > 0u);
  BOOST_TEST(rec.bytes_measured.collective > 0u);
  // The collectives count what they copy, the planner what its cost model says they copy.
  BOOST_TEST(rec.bytes_measured.collective == rec.bytes_planned.collective);
  BOOST_TEST(rec.streaming_measured.size() == 2u);
  // Evaluation ran its own plan: its phases measured as planned, and its speed.
  BOOST_REQUIRE(rec.eval.has_value());
  const planner::Plan eval_plan = planner::build_plan(tiny_config(), planner::Program::kEval);
  BOOST_REQUIRE_EQUAL(rec.eval->phases.size(), eval_plan.phases.size());
  for (std::size_t p = 0; p < eval_plan.phases.size(); ++p) {
    const auto& phase = rec.eval->phases[p];
    BOOST_TEST(phase.name == eval_plan.phases[p].name);
    BOOST_TEST(phase.planned.peak == eval_plan.phases[p].memory.peak);
    BOOST_TEST(phase.measured.size() == 2u);
    for (const auto& m : phase.measured) BOOST_TEST(m.peak == phase.planned.peak, phase.name);
    BOOST_TEST(phase.measured_seconds > 0.0);
  }
  BOOST_TEST(rec.eval->n_samples == rec.test->n_samples);
  BOOST_TEST(rec.eval->evaluations >= 1);
  BOOST_TEST(rec.eval->samples_per_second > 0.0);
  BOOST_TEST(rec.eval->batch_size == eval_plan.global_batch_size);
  // An interrupted run writes a valid run file too, without a test result.
  std::int64_t counter = 0;
  TrainOptions stop;
  stop.stop_requested = [&counter] { return ++counter == 3; };
  const TrainResult part = run(tiny_config(), stop, dir / "part");
  BOOST_TEST(validate_run_file(part.run_file) == 0);
  BOOST_TEST(!part.record.test.has_value());
}

// The resolved config says what each layer is: a dropout layer as one, with its rate, so
// the run file and the config hash in checkpoints tell dropout models apart.
BOOST_AUTO_TEST_CASE(resolved_config_keeps_each_layers_kind) {
  config::Config c = tiny_config();
  c.model.layers.insert(c.model.layers.begin() + 1,
                        config::make_layer("drop1", "dropout", {{"rate", 0.25}}));
  const nlohmann::json layers = resolved_config_json(c)["model"]["layers"];
  BOOST_REQUIRE(layers.size() == c.model.layers.size());
  BOOST_TEST(layers[0]["type"] == "linear");
  BOOST_TEST(layers[1] == (nlohmann::json{{"name", "drop1"}, {"type", "dropout"}, {"rate", 0.25}}));
  config::Config other = c;
  other.model.layers[1].attributes.set("rate", 0.5);
  BOOST_TEST(config_hash(c) != config_hash(other));
}

// A run file that cannot be written: the reason, and no temporary left behind. Each
// process writes through a temporary of its own (".NAME.tmp-<pid>").
BOOST_AUTO_TEST_CASE(failed_write_says_why_and_leaves_no_temporary) {
  const auto dir = scratch("run_file_write");
  reports::RunRecord record;
  record.name = "tiny";
  const auto temporary = [](const fs::path& path) {
    return temporary_path(path.string(), TemporaryName::kHiddenPerProcess);
  };
  BOOST_TEST(temporary(dir / "run.json") ==
             (dir / fmt::format(".run.json.tmp-{}", ::getpid())).string());
  // rename(2) cannot replace a folder that holds something.
  const fs::path blocked = dir / "blocked.json";
  fs::create_directories(blocked / "inside");
  const std::string why = error_of([&] { reports::write_run_file(record, blocked.string()); });
  // Each message names the file asked for, not the temporary (issue 37 item 10).
  BOOST_TEST(why == blocked.string() + ": cannot move the written file into place: Is a directory",
             why);
  BOOST_TEST(!fs::exists(temporary(blocked)));
  // The temporary cannot be opened.
  const fs::path target = dir / "run.json";
  fs::create_directories(temporary(target));
  const std::string why2 = error_of([&] { reports::write_run_file(record, target.string()); });
  BOOST_TEST(why2 == target.string() + ": cannot open for writing: Is a directory", why2);
  BOOST_TEST(!fs::exists(target));
  // A link where the temporary goes is not written through (a full disk is in
  // poprun_outputs_test.sh: it needs a mount).
  const fs::path victim = dir / "victim.txt";
  write_bytes(victim, {'k', 'e', 'e', 'p'});
  const fs::path linked = dir / "linked.json";
  fs::create_symlink(victim, temporary(linked));
  const std::string why3 = error_of([&] { reports::write_run_file(record, linked.string()); });
  BOOST_TEST(why3 == linked.string() +
                         ": cannot open for writing: Too many levels of symbolic "
                         "links",
             why3);
  BOOST_TEST((file_bytes(victim) == std::vector<char>{'k', 'e', 'e', 'p'}));
}

BOOST_AUTO_TEST_SUITE_END()
