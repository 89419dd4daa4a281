// Image-classification datasets as the engine keeps them: pixels as bytes, read once
// and normalised on the fly. MNIST and Fashion-MNIST come as IDX files (raw or gzip);
// the synthetic set is made from a seed, for tests and benchmarks that must not
// depend on downloads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "planner/host_memory.h"

namespace popkit::engine {

struct Dataset {
  std::string name;
  std::int64_t n = 0;     // samples
  std::int64_t rows = 0;  // pixels per image: rows x cols
  std::int64_t cols = 0;
  std::vector<std::uint8_t> images;  // n * rows * cols, row-major per image
  std::vector<std::uint8_t> labels;  // n, each < n_classes

  [[nodiscard]] std::int64_t image_size() const { return rows * cols; }
  [[nodiscard]] const std::uint8_t* image(std::int64_t i) const {
    return images.data() + i * image_size();
  }
};

inline constexpr std::uint32_t kIdxImagesMagic = 2051;  // 0x00000803: ubyte, 3 dims
inline constexpr std::uint32_t kIdxLabelsMagic = 2049;  // 0x00000801: ubyte, 1 dim
inline constexpr int kClasses = 10;

// Reads a whole file; gzip is recognised by its magic bytes and inflated.
// Throws popkit::Error naming the file when it is missing, unreadable or corrupt.
std::vector<std::uint8_t> read_maybe_gzip(const std::string& path);

// Reads an IDX image file and its label file (raw or gzip). Checks the magic numbers,
// the big-endian dimensions against the file sizes, that the counts match and that
// every label is below 10; each failure is a popkit::Error naming the file and what is
// wrong.
Dataset read_idx(const std::string& images_path, const std::string& labels_path);

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
// ~/.cache/popkit/data (scripts/fetch_data.sh fills it).
std::string data_dir(const config::Data& data);

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
