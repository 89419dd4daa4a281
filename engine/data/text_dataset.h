// Text for language models, byte-level: any file's bytes are its tokens (vocabulary
// 256, nothing to download or to train). The file splits once, deterministically: the
// last floor(n x validation_fraction) bytes are the validation split, the rest training.
// A sample is a window of T + 1 bytes of a split: inputs bytes[s, s + T), targets
// bytes[s + 1, s + T + 1).
//
// Which windows: evaluation reads the text_windows(n, T) windows at s = i T in order.
// Training visits text_training_windows(n, T) windows a epoch at s = i T + shift, i in
// the epoch's order (runner/data_order.h: a permutation made from (seed, epoch)) and
// shift = text_window_shift(n, T, seed, epoch): a run sees each part of the text at T
// different positions over T epochs, yet every window follows from (seed, epoch,
// position) alone, so a resumed run and R replicas x B against 1 x R B see the same.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/data/dataset.h"
#include "planner/host_memory.h"

namespace popkit::engine {

inline constexpr std::int64_t kByteVocabulary = 256;
inline constexpr double kValidationFraction = 0.1;  // as nanoGPT's character-level data
// A text file may hold at most this much (the file is held in memory).
inline constexpr std::uint64_t kMaxTextBytes = std::uint64_t{4} << 30;

struct TextCorpus {
  std::string source;               // the file it was read from, for messages
  std::vector<std::uint8_t> bytes;  // every byte is a token
  std::int64_t n_train = 0;         // bytes [0, n_train) train, [n_train, n) validation

  [[nodiscard]] std::span<const std::uint8_t> split(Split which) const {
    const std::span<const std::uint8_t> all(bytes);
    return which == Split::kTrain ? all.first(static_cast<std::size_t>(n_train))
                                  : all.subspan(static_cast<std::size_t>(n_train));
  }
};

// Reads a regular file (base/input_file.h's reasons otherwise) of at most kMaxTextBytes
// as parse_text does.
TextCorpus read_text(const std::string& path, std::int64_t seq_len,
                     double validation_fraction = kValidationFraction);

// Splits `bytes` (named `name` in messages). A popkit::Error when the text is empty or
// either split is shorter than one window of seq_len + 1 bytes, with the sizes.
TextCorpus parse_text(std::string_view bytes, const std::string& name, std::int64_t seq_len,
                      double validation_fraction = kValidationFraction);

// The validation split's bytes of a text of n bytes: the last floor(n x fraction).
[[nodiscard]] std::int64_t text_validation_bytes(std::int64_t n_bytes, double validation_fraction);

// The size of a split of the text at `path` as the host holds it (text_window_set's
// windows, T input and T target bytes each, and the file's bytes), from the file's size
// alone; nullopt when the file cannot be sized or the split holds no window (read_text
// then says why).
std::optional<planner::DatasetSize> peek_text_split(const std::string& path, std::int64_t seq_len,
                                                    double validation_fraction, Split which);

// Windows of a split of n bytes at s = i T: floor((n - 1) / T).
[[nodiscard]] std::int64_t text_windows(std::int64_t n_bytes, std::int64_t seq_len);
// Training's windows an epoch: one fewer than text_windows when there are two or more,
// which leaves room to shift them all by up to T - 1 bytes.
[[nodiscard]] std::int64_t text_training_windows(std::int64_t n_bytes, std::int64_t seq_len);
// The epoch's shift of every training window: uniform in [0, min(T - 1, n - 1 - W T)]
// (W training windows), drawn by splitmix64 from (seed, epoch).
[[nodiscard]] std::int64_t text_window_shift(std::int64_t n_bytes, std::int64_t seq_len,
                                             std::uint64_t seed, std::int64_t epoch);

// A split's windows as a dataset of samples, window i at s = i T: its `image` the T input
// tokens (rows T, cols 1), its labels the T targets (label_width T). The validation
// split has text_windows of them, what evaluation reads; the training split
// text_training_windows, an epoch's (training reads them shifted, through TextBatches).
Dataset text_window_set(const TextCorpus& corpus, Split which, std::int64_t seq_len);

// Global batches of windows of one split laid out as PopXL's host arrays are, [A, R, B,
// T]: replica r at step s gets windows (s R + r) B + i. A micro-batch's `pixels` are its
// B T input tokens, window after window; its `labels` its B T targets; `size` is B.
class TextBatches final : public BatchSource {
 public:
  TextBatches(std::span<const std::uint8_t> split, std::int64_t seq_len, std::int64_t replicas,
              std::int64_t accumulation, std::int64_t micro_batch_size);

  [[nodiscard]] std::int64_t global_batch_size() const {
    return replicas_ * accumulation_ * micro_;
  }
  // The windows starting at windows[i] T + shift (global_batch_size of them).
  void set_batch(std::span<const std::int64_t> windows, std::int64_t shift);
  // The global batch `index` of `order` (consecutive slices of it).
  void set_batch(const std::vector<std::int64_t>& order, std::int64_t index, std::int64_t shift);
  [[nodiscard]] MicroBatch micro_batch(std::int64_t replica, std::int64_t step) const override;

 private:
  std::span<const std::uint8_t> text_;
  std::int64_t seq_, replicas_, accumulation_, micro_;
  std::vector<std::uint8_t> inputs_;   // [A R B, T]
  std::vector<std::uint8_t> targets_;  // [A R B, T]
};

}  // namespace popkit::engine
