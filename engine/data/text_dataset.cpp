// Byte-level text: the split, the windows of each epoch, and global batches of windows.
#include "engine/data/text_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "base/input_file.h"
#include "engine/tensor/random.h"

namespace popkit::engine {

TextCorpus read_text(const std::string& path, std::int64_t seq_len, double validation_fraction) {
  InputFile file = open_input_file(path, "give the path of a text file");
  const std::string bytes = file.read_all(kMaxTextBytes, "text file");
  return parse_text(bytes, path, seq_len, validation_fraction);
}

std::int64_t text_validation_bytes(std::int64_t n_bytes, double validation_fraction) {
  return static_cast<std::int64_t>(std::floor(static_cast<double>(n_bytes) * validation_fraction));
}

std::optional<planner::DatasetSize> peek_text_split(const std::string& path, std::int64_t seq_len,
                                                    double validation_fraction, Split which) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size == 0 || size > kMaxTextBytes || seq_len < 1) return std::nullopt;
  const auto n = static_cast<std::int64_t>(size);
  const std::int64_t n_validation = text_validation_bytes(n, validation_fraction);
  const std::int64_t n_split = which == Split::kTrain ? n - n_validation : n_validation;
  if (n_split < seq_len + 1) return std::nullopt;
  const std::int64_t windows = which == Split::kTrain ? text_training_windows(n_split, seq_len)
                                                      : text_windows(n_split, seq_len);
  return planner::DatasetSize{windows, seq_len, seq_len, n};
}

TextCorpus parse_text(std::string_view bytes, const std::string& name, std::int64_t seq_len,
                      double validation_fraction) {
  POPKIT_ASSERT(seq_len >= 1 && validation_fraction > 0.0 && validation_fraction < 1.0);
  const auto n = static_cast<std::int64_t>(bytes.size());
  const std::int64_t window = seq_len + 1;
  if (n == 0)
    throw Error("{}: the text file is empty; a sequence of {} needs windows of {} bytes", name,
                seq_len, window);
  const std::int64_t n_validation = text_validation_bytes(n, validation_fraction);
  const std::int64_t n_train = n - n_validation;
  const auto percent = validation_fraction * 100.0;
  if (n_train < window)
    throw Error(
        "{}: {} bytes leave {} for training (the first {:g}%), fewer than one window of "
        "sequence + 1 = {} bytes",
        name, n, n_train, 100.0 - percent, window);
  if (n_validation < window)
    throw Error(
        "{}: {} bytes leave {} for validation (the last {:g}%), fewer than one window of "
        "sequence + 1 = {} bytes; the text needs at least {} bytes",
        name, n, n_validation, percent, window,
        static_cast<std::int64_t>(std::ceil(static_cast<double>(window) / validation_fraction)));
  TextCorpus corpus;
  corpus.source = name;
  corpus.bytes.assign(bytes.begin(), bytes.end());
  corpus.n_train = n_train;
  return corpus;
}

std::int64_t text_windows(std::int64_t n_bytes, std::int64_t seq_len) {
  return n_bytes < 1 ? 0 : (n_bytes - 1) / seq_len;
}

std::int64_t text_training_windows(std::int64_t n_bytes, std::int64_t seq_len) {
  const std::int64_t w = text_windows(n_bytes, seq_len);
  return w >= 2 ? w - 1 : w;
}

std::int64_t text_window_shift(std::int64_t n_bytes, std::int64_t seq_len, std::uint64_t seed,
                               std::int64_t epoch) {
  const std::int64_t w = text_training_windows(n_bytes, seq_len);
  // windows i T + shift, i < W, end by byte n: shift <= n - 1 - W T
  const std::int64_t most = std::min(seq_len - 1, n_bytes - 1 - w * seq_len);
  if (most <= 0) return 0;
  // A stream of its own, apart from epoch_order's (seeded seed ^ k (epoch + 1)).
  std::uint64_t state = seed ^ 0x7E47'5B1F'0C3D'92A5ull;
  state = splitmix64(state) ^ static_cast<std::uint64_t>(epoch);
  splitmix64(state);
  return static_cast<std::int64_t>(uniform_below(state, static_cast<std::uint64_t>(most + 1)));
}

Dataset text_window_set(const TextCorpus& corpus, Split which, std::int64_t seq_len) {
  const std::span<const std::uint8_t> text = corpus.split(which);
  const auto n_bytes = static_cast<std::int64_t>(text.size());
  Dataset d;
  d.name = which == Split::kTrain ? "text training split" : "text validation split";
  d.source = corpus.source;
  d.n = which == Split::kTrain ? text_training_windows(n_bytes, seq_len)
                               : text_windows(n_bytes, seq_len);
  d.rows = seq_len;
  d.cols = 1;
  d.label_width = seq_len;
  const auto T = static_cast<std::size_t>(seq_len);
  d.images.resize(static_cast<std::size_t>(d.n) * T);
  d.labels.resize(d.images.size());
  for (std::size_t i = 0; i < static_cast<std::size_t>(d.n); ++i) {
    std::copy_n(text.begin() + static_cast<std::ptrdiff_t>(i * T), T,
                d.images.begin() + static_cast<std::ptrdiff_t>(i * T));
    std::copy_n(text.begin() + static_cast<std::ptrdiff_t>(i * T + 1), T,
                d.labels.begin() + static_cast<std::ptrdiff_t>(i * T));
  }
  return d;
}

TextBatches::TextBatches(std::span<const std::uint8_t> split, std::int64_t seq_len,
                         std::int64_t replicas, std::int64_t accumulation,
                         std::int64_t micro_batch_size)
    : text_(split),
      seq_(seq_len),
      replicas_(replicas),
      accumulation_(accumulation),
      micro_(micro_batch_size) {}

void TextBatches::set_batch(std::span<const std::int64_t> windows, std::int64_t shift) {
  if (static_cast<std::int64_t>(windows.size()) != global_batch_size())
    throw Error("a global batch needs {} windows ({} replicas x {} steps x {}), got {}",
                global_batch_size(), replicas_, accumulation_, micro_, windows.size());
  const auto n = static_cast<std::int64_t>(text_.size());
  const auto T = static_cast<std::size_t>(seq_);
  inputs_.resize(windows.size() * T);
  targets_.resize(windows.size() * T);
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const std::int64_t start = windows[i] * seq_ + shift;
    if (windows[i] < 0 || shift < 0 || start + seq_ + 1 > n)
      throw Error("window {} shifted by {} needs bytes [{}, {}), the split has {}", windows[i],
                  shift, start, start + seq_ + 1, n);
    const auto* first = text_.data() + start;
    std::copy_n(first, T, inputs_.begin() + static_cast<std::ptrdiff_t>(i * T));
    std::copy_n(first + 1, T, targets_.begin() + static_cast<std::ptrdiff_t>(i * T));
  }
}

void TextBatches::set_batch(const std::vector<std::int64_t>& order, std::int64_t index,
                            std::int64_t shift) {
  const std::int64_t g = global_batch_size();
  if ((index + 1) * g > static_cast<std::int64_t>(order.size()))
    throw Error("global batch {} needs windows up to {}, the order has {}", index, (index + 1) * g,
                order.size());
  set_batch(std::span<const std::int64_t>(order).subspan(static_cast<std::size_t>(index * g),
                                                         static_cast<std::size_t>(g)),
            shift);
}

MicroBatch TextBatches::micro_batch(std::int64_t replica, std::int64_t step) const {
  // window = (s R + r) B + i
  const auto first = static_cast<std::size_t>(((step * replicas_ + replica) * micro_) * seq_);
  const auto n = static_cast<std::size_t>(micro_ * seq_);
  MicroBatch mb;
  mb.size = micro_;
  mb.pixels = std::span<const std::uint8_t>(inputs_).subspan(first, n);
  mb.labels = std::span<const std::uint8_t>(targets_).subspan(first, n);
  return mb;
}

}  // namespace popkit::engine
