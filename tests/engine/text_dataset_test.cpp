// Byte-level text (engine/data/text_dataset.h) on tiny strings: the split, every error
// with its whole message, the windows of training and evaluation, the epoch's shift, and
// global batches laid out [A, R, B, T] so that R replicas x B see what 1 x R B sees.
#include "engine/data/text_dataset.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"

namespace fs = std::filesystem;
using namespace popkit::engine;
using popkit::Error;

namespace {

std::string error_of(const std::string& text, std::int64_t seq_len) {
  try {
    parse_text(text, "t.txt", seq_len);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string as_string(std::span<const std::uint8_t> bytes) {
  return {bytes.begin(), bytes.end()};
}

// The 40 bytes "abcdefghijklmnopqrstuvwxyz0123456789ABCD".
const std::string kText = "abcdefghijklmnopqrstuvwxyz0123456789ABCD";

}  // namespace

BOOST_AUTO_TEST_SUITE(text)

BOOST_AUTO_TEST_CASE(the_last_tenth_of_the_bytes_is_the_validation_split) {
  const TextCorpus c = parse_text(kText, "t.txt", 3);
  BOOST_TEST(c.n_train == 36);
  BOOST_TEST(as_string(c.split(Split::kTrain)) == kText.substr(0, 36));
  BOOST_TEST(as_string(c.split(Split::kTest)) == "ABCD");
  // Any byte is a token, NUL and 0xFF included.
  const std::string binary(
      "\x00\xff\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e"
      "\x0f\x10\x11\x12",
      20);
  const TextCorpus b = parse_text(binary, "b.bin", 1, 0.25);
  BOOST_TEST(b.n_train == 15);
  BOOST_TEST(b.bytes.front() == 0);
  BOOST_TEST(b.bytes[1] == 255);
}

BOOST_AUTO_TEST_CASE(empty_and_short_texts_are_refused_with_their_sizes) {
  BOOST_TEST(error_of("", 4) ==
             "t.txt: the text file is empty; a sequence of 4 needs windows of 5 bytes");
  BOOST_TEST(error_of("abcd", 4) ==
             "t.txt: 4 bytes leave 4 for training (the first 90%), fewer than one window of "
             "sequence + 1 = 5 bytes");
  BOOST_TEST(error_of(kText, 4) ==
             "t.txt: 40 bytes leave 4 for validation (the last 10%), fewer than one window of "
             "sequence + 1 = 5 bytes; the text needs at least 50 bytes");
  BOOST_TEST(error_of(kText + "0123456789", 4).empty());
}

BOOST_AUTO_TEST_CASE(files_are_read_and_a_missing_one_is_named) {
  const fs::path dir = fs::temp_directory_path() / ("popkit-text-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "t.txt").string();
  std::ofstream(path, std::ios::binary) << kText;
  const TextCorpus c = read_text(path, 3);
  BOOST_TEST(c.source == path);
  BOOST_TEST(as_string(c.bytes) == kText);
  const std::string missing = (dir / "nope.txt").string();
  std::string message;
  try {
    read_text(missing, 3);
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_TEST(message == missing + ": no such file");
  std::ofstream(path, std::ios::binary | std::ios::trunc);
  try {
    read_text(path, 3);
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_TEST(message ==
             path + ": the text file is empty; a sequence of 3 needs windows of 4 bytes");
  fs::remove_all(dir);
}

// The host-memory check sizes a split from the file's size alone: the windows
// text_window_set cuts, their bytes (T inputs and T targets each) and the file's.
BOOST_AUTO_TEST_CASE(a_split_is_sized_before_it_is_read) {
  const fs::path dir = fs::temp_directory_path() / ("popkit-peek-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "t.txt").string();
  std::ofstream(path, std::ios::binary) << kText << kText << kText;  // 120 bytes
  for (const std::int64_t T : {1, 3, 5, 11})
    for (const Split which : {Split::kTrain, Split::kTest}) {
      BOOST_TEST_CONTEXT("T " << T << (which == Split::kTrain ? " train" : " test")) {
        const Dataset d = text_window_set(read_text(path, T), which, T);
        const auto peeked = peek_text_split(path, T, kValidationFraction, which);
        BOOST_REQUIRE(peeked.has_value());
        BOOST_TEST(peeked->n == d.n);
        BOOST_TEST(peeked->n * (peeked->image_bytes + peeked->label_bytes) ==
                   static_cast<std::int64_t>(d.images.size() + d.labels.size()));
        BOOST_TEST(peeked->file_bytes == 120);
      }
    }
  // A validation split shorter than a window (12 bytes, T 12), or no file: not sized.
  BOOST_TEST(!peek_text_split(path, 12, kValidationFraction, Split::kTest).has_value());
  BOOST_TEST(!peek_text_split((dir / "nope.txt").string(), 3, 0.1, Split::kTrain).has_value());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(windows_tile_the_split_and_training_leaves_room_to_shift) {
  // 36 bytes, T 8: evaluation's 4 windows start at 0, 8, 16, 24 (the last ends at byte
  // 33); training's 3 leave 36 - 1 - 24 = 11 spare bytes, so shifts 0..7 are possible.
  BOOST_TEST(text_windows(36, 8) == 4);
  BOOST_TEST(text_training_windows(36, 8) == 3);
  BOOST_TEST(text_windows(9, 8) == 1);  // T + 1 bytes: one window, no shift
  BOOST_TEST(text_training_windows(9, 8) == 1);
  BOOST_TEST(text_window_shift(9, 8, 42, 0) == 0);
  std::set<std::int64_t> shifts;
  for (std::int64_t epoch = 0; epoch < 200; ++epoch) {
    const std::int64_t s = text_window_shift(36, 8, 42, epoch);
    BOOST_TEST(s == text_window_shift(36, 8, 42, epoch));  // from (seed, epoch) alone
    shifts.insert(s);
  }
  BOOST_TEST(shifts.size() == 8u);
  BOOST_TEST(*shifts.rbegin() == 7);
  // 18 bytes, T 8: two windows, one for training, spare 18 - 1 - 8 = 9: shifts 0..7.
  // 12 bytes, T 8: one window, spare 3: shifts 0..3 only.
  for (std::int64_t epoch = 0; epoch < 100; ++epoch)
    BOOST_TEST(text_window_shift(12, 8, 1, epoch) <= 3);
}

BOOST_AUTO_TEST_CASE(a_window_is_its_inputs_and_its_targets_one_byte_on) {
  const TextCorpus c = parse_text(kText, "t.txt", 3);
  TextBatches batches(c.split(Split::kTrain), 4, 1, 1, 2);
  batches.set_batch(std::vector<std::int64_t>{2, 0}, 1);
  const MicroBatch mb = batches.micro_batch(0, 0);
  BOOST_TEST(mb.size == 2);
  BOOST_TEST(as_string(mb.pixels) == "jklmbcde");  // windows at 2 x 4 + 1 and 0 x 4 + 1
  BOOST_TEST(as_string(mb.labels) == "klmncdef");
}

BOOST_AUTO_TEST_CASE(global_batches_are_laid_out_as_replicas_and_steps) {
  // R 2 x A 2 x B 1 against R 1 x A 1 x B 4: replica r at step s holds window (s R + r) B.
  const TextCorpus c = parse_text(kText, "t.txt", 3);
  const std::vector<std::int64_t> windows = {5, 1, 7, 3};
  TextBatches split(c.split(Split::kTrain), 4, 2, 2, 1), whole(c.split(Split::kTrain), 4, 1, 1, 4);
  split.set_batch(windows, 2);
  whole.set_batch(windows, 2);
  std::string gathered;
  for (std::int64_t s = 0; s < 2; ++s)
    for (std::int64_t r = 0; r < 2; ++r) gathered += as_string(split.micro_batch(r, s).pixels);
  BOOST_TEST(gathered == as_string(whole.micro_batch(0, 0).pixels));
  BOOST_TEST(as_string(split.micro_batch(1, 0).pixels) == "ghij");  // window 1 at 1 x 4 + 2
}

BOOST_AUTO_TEST_CASE(windows_past_the_split_are_refused) {
  const TextCorpus c = parse_text(kText, "t.txt", 3);
  TextBatches batches(c.split(Split::kTrain), 4, 1, 1, 1);
  std::string message;
  try {
    batches.set_batch(std::vector<std::int64_t>{8}, 0);
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_TEST(message == "window 8 shifted by 0 needs bytes [32, 37), the split has 36");
  try {
    batches.set_batch(std::vector<std::int64_t>{0, 1}, 0);
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_TEST(message == "a global batch needs 1 windows (1 replicas x 1 steps x 1), got 2");
}

BOOST_AUTO_TEST_SUITE_END()
