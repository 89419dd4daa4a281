// Datasets as the engine keeps them: pixels as bytes, read once and normalised on the
// fly. MNIST and Fashion-MNIST come as IDX files (raw or gzip); the synthetic set is made
// from a seed, for tests and benchmarks that must not depend on downloads; a text file's
// windows of tokens (text_dataset.h) are samples of T tokens with T labels each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "planner/host_memory.h"

namespace popkit::engine {

struct Dataset {
  std::string name;
  std::string source;     // the images file it was read from; empty when made here
  std::int64_t n = 0;     // samples
  std::int64_t rows = 0;  // pixels per image: rows x cols
  std::int64_t cols = 0;
  std::vector<std::uint8_t> images;  // n * rows * cols, row-major per image
  std::vector<std::uint8_t> labels;  // n * label_width, each < n_classes
  // Labels a sample: 1 for an image's class; a text window's T targets, one a position
  // (its `image` then holds the window's T input tokens: rows T, cols 1).
  std::int64_t label_width = 1;

  [[nodiscard]] std::int64_t image_size() const { return rows * cols; }
  [[nodiscard]] const std::uint8_t* image(std::int64_t i) const {
    return images.data() + i * image_size();
  }
  [[nodiscard]] const std::uint8_t* label(std::int64_t i) const {
    return labels.data() + i * label_width;
  }
};

inline constexpr std::uint32_t kIdxImagesMagic = 2051;  // 0x00000803: ubyte, 3 dims
inline constexpr std::uint32_t kIdxLabelsMagic = 2049;  // 0x00000801: ubyte, 1 dim
inline constexpr int kClasses = 10;

// An IDX file (raw or inflated) may hold at most this much: MNIST's largest is 47 MB,
// and a header claiming more is refused before anything is inflated.
inline constexpr std::uint64_t kMaxIdxBytes = std::uint64_t{4} << 30;

// Reads an IDX image file and its label file: parse_idx on their bytes. Only regular
// files are read ("is a directory", "is not a regular file (a FIFO)", ...; see
// base/input_file.h), each at most kMaxIdxBytes.
Dataset read_idx(const std::string& images_path, const std::string& labels_path);

// The IDX reader on bytes in memory, each raw or gzip (recognised by its magic bytes);
// the names stand for the files in messages. Checks the magic numbers, the big-endian
// dimensions against the sizes, that the counts match and that every label is below 10.
// A gzip stream is inflated only as far as its header allows (one byte past it shows
// trailing data), and bytes after the stream's end are refused. Each failure is a
// popkit::Error naming the file and what is wrong.
Dataset parse_idx(std::string_view images, std::string_view labels, const std::string& images_name,
                  const std::string& labels_name);

// Writes IDX files (raw), as the fetch script produces them; used by tests.
void write_idx_images(const std::string& path, const Dataset& data);
void write_idx_labels(const std::string& path, const Dataset& data);

// A learnable synthetic set: one random prototype image per class (from `seed`) plus
// noise (standard deviation relative to the pixel range). Samples come from `stream`:
// the training and test sets share the prototypes and differ in their samples.
// Labels are below `n_classes` (at most 256).
Dataset make_synthetic(std::int64_t n, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                       double noise, std::uint64_t stream = 0, int n_classes = kClasses);

enum class Split { kTrain, kTest };

// Where the named datasets live: data.dir, else $POPKIT_DATA_DIR, else
// ~/.cache/popkit/data, which popkit-fetch-data (scripts/fetch_data.sh in a source
// tree) fills.
std::string data_dir(const config::Data& data);
// Dataset text's file: data.path, a relative one under data_dir() (as
// scripts/fetch_data.sh's text/fortunes.txt).
std::string text_path(const config::Data& data);

// The size of the split load_dataset would return, without reading the pixels: from
// the config (synthetic) or the IDX image file's header (raw or gzip), so the host
// memory a run needs is known before the data is read. nullopt when the file is not
// there or not IDX: load_dataset then says why.
std::optional<planner::DatasetSize> peek_dataset_size(const config::Config& config, Split split);

// The dataset a config names, one split: mnist and fashion-mnist from data_dir() (raw
// or .gz; Fashion-MNIST also from Debian's /usr/share/datasets/fashion-mnist), idx from
// the given paths, synthetic made from training.seed with images of `input_shape` and
// as many classes as the last layer has outputs.
Dataset load_dataset(const config::Config& config, Split split);

}  // namespace popkit::engine
