// IDX reading (raw or gzip) with checks that name the file, and the synthetic set.
#include "engine/data/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "config/error.h"
#include "config/input_file.h"
#include "engine/tensor/random.h"

namespace popkit::engine {
namespace {

std::uint32_t read_be32(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
  return (std::uint32_t{bytes[offset]} << 24) | (std::uint32_t{bytes[offset + 1]} << 16) |
         (std::uint32_t{bytes[offset + 2]} << 8) | std::uint32_t{bytes[offset + 3]};
}

void put_be32(std::ofstream& out, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.write(b, 4);
}

std::vector<std::uint8_t> gunzip(const std::vector<std::uint8_t>& in, const std::string& path) {
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error("{}: cannot start gzip decoder", path);
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> chunk(1 << 20);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = chunk.data();
    zs.avail_out = static_cast<uInt>(chunk.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string why = rc == Z_BUF_ERROR ? "truncated gzip data" : "corrupt gzip data";
      inflateEnd(&zs);
      throw Error("{}: {}", path, why);
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(chunk.size() - zs.avail_out));
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw Error("{}: truncated gzip data", path);
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace

std::vector<std::uint8_t> read_maybe_gzip(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) throw Error("{}: is a directory, not a data file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("{}: cannot open for reading", path);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("{}: read error", path);
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return gunzip(bytes, path);
  return bytes;
}

Dataset read_idx(const std::string& images_path, const std::string& labels_path) {
  const std::vector<std::uint8_t> img = read_maybe_gzip(images_path);
  const std::vector<std::uint8_t> lab = read_maybe_gzip(labels_path);
  // The magic number first (a label file given as images is named as such), then the size.
  if (img.size() >= 4 && read_be32(img, 0) != kIdxImagesMagic)
    throw Error("{}: wrong magic number {} (an IDX image file has {})", images_path, read_be32(img, 0),
                kIdxImagesMagic);
  if (lab.size() >= 4 && read_be32(lab, 0) != kIdxLabelsMagic)
    throw Error("{}: wrong magic number {} (an IDX label file has {})", labels_path, read_be32(lab, 0),
                kIdxLabelsMagic);
  if (img.size() < 16) throw Error("{}: truncated: {} bytes, an IDX image header needs 16", images_path, img.size());
  if (lab.size() < 8) throw Error("{}: truncated: {} bytes, an IDX label header needs 8", labels_path, lab.size());

  Dataset d;
  d.n = read_be32(img, 4);
  d.rows = read_be32(img, 8);
  d.cols = read_be32(img, 12);
  const std::int64_t n_labels = read_be32(lab, 4);
  if (d.rows == 0 || d.cols == 0) throw Error("{}: image size {}x{} is empty", images_path, d.rows, d.cols);
  const std::uint64_t img_need = 16 + static_cast<std::uint64_t>(d.n) * static_cast<std::uint64_t>(d.rows * d.cols);
  if (img.size() != img_need)
    throw Error("{}: {}: header says {} images of {}x{} ({} bytes) but the file has {} bytes", images_path,
                img.size() < img_need ? "truncated" : "trailing data", d.n, d.rows, d.cols, img_need, img.size());
  const std::uint64_t lab_need = 8 + static_cast<std::uint64_t>(n_labels);
  if (lab.size() != lab_need)
    throw Error("{}: {}: header says {} labels ({} bytes) but the file has {} bytes", labels_path,
                lab.size() < lab_need ? "truncated" : "trailing data", n_labels, lab_need, lab.size());
  if (n_labels != d.n)
    throw Error("{} has {} images but {} has {} labels", images_path, d.n, labels_path, n_labels);
  d.images.assign(img.begin() + 16, img.end());
  d.labels.assign(lab.begin() + 8, lab.end());
  for (std::int64_t i = 0; i < d.n; ++i) {
    if (d.labels[static_cast<std::size_t>(i)] >= kClasses)
      throw Error("{}: label {} of sample {} is not a class 0-{}", labels_path,
                  d.labels[static_cast<std::size_t>(i)], i, kClasses - 1);
  }
  d.name = std::filesystem::path(images_path).filename().string();
  return d;
}

void write_idx_images(const std::string& path, const Dataset& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("{}: cannot open for writing", path);
  put_be32(out, kIdxImagesMagic);
  put_be32(out, static_cast<std::uint32_t>(data.n));
  put_be32(out, static_cast<std::uint32_t>(data.rows));
  put_be32(out, static_cast<std::uint32_t>(data.cols));
  out.write(reinterpret_cast<const char*>(data.images.data()), static_cast<std::streamsize>(data.images.size()));
  if (!out) throw Error("{}: write failed", path);
}

void write_idx_labels(const std::string& path, const Dataset& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("{}: cannot open for writing", path);
  put_be32(out, kIdxLabelsMagic);
  put_be32(out, static_cast<std::uint32_t>(data.n));
  out.write(reinterpret_cast<const char*>(data.labels.data()), static_cast<std::streamsize>(data.labels.size()));
  if (!out) throw Error("{}: write failed", path);
}

Dataset make_synthetic(std::int64_t n, std::int64_t rows, std::int64_t cols, std::uint64_t seed, double noise,
                       std::uint64_t stream, int n_classes) {
  if (n_classes < 1 || n_classes > 256) throw Error("synthetic data: {} classes, need 1 to 256", n_classes);
  Dataset d;
  d.name = "synthetic";
  d.n = n;
  d.rows = rows;
  d.cols = cols;
  const std::int64_t size = rows * cols;
  std::uint64_t rng = seed;
  // One prototype per class: a sparse random pattern of bright pixels, like a digit.
  std::vector<double> prototypes(static_cast<std::size_t>(n_classes * size));
  for (double& p : prototypes) p = uniform01(rng) < 0.2 ? 0.6 + 0.4 * uniform01(rng) : 0.0;
  std::uint64_t samples = seed ^ (0xD1B54A32D192ED03ull * (stream + 1));
  d.images.resize(static_cast<std::size_t>(n * size));
  d.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto label = static_cast<std::uint8_t>(splitmix64(samples) % static_cast<std::uint64_t>(n_classes));
    d.labels[static_cast<std::size_t>(i)] = label;
    const double* proto = prototypes.data() + label * size;
    std::uint8_t* px = d.images.data() + i * size;
    for (std::int64_t k = 0; k < size; ++k) {
      const double v = std::clamp(proto[k] + noise * standard_normal(samples) * 0.5, 0.0, 1.0);
      px[k] = static_cast<std::uint8_t>(std::lround(v * 255.0));
    }
  }
  return d;
}

std::string data_dir(const config::Data& data) {
  if (!data.dir.empty()) return data.dir;
  if (const char* env = std::getenv("POPKIT_DATA_DIR"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : ".") / ".cache" / "popkit" / "data").string();
}

namespace {

// The IDX file `stem` in `dir`, raw or gzip; empty when neither exists.
std::string find_idx(const std::filesystem::path& dir, const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / name, ec)) return (dir / name).string();
  }
  return "";
}

struct IdxFiles {
  std::string images, labels;
};

// The image and label files of a named dataset's split, from the first of `dirs` that has either.
IdxFiles find_named(const std::vector<std::filesystem::path>& dirs, const std::string& what,
                    Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  for (const auto& dir : dirs) {
    const std::string images = find_idx(dir, prefix + "-images-idx3-ubyte");
    const std::string labels = find_idx(dir, prefix + "-labels-idx1-ubyte");
    if (images.empty() && labels.empty()) continue;
    if (images.empty()) throw Error("{}: {}-images-idx3-ubyte[.gz] is missing beside {}", dir.string(), prefix, labels);
    if (labels.empty()) throw Error("{}: {}-labels-idx1-ubyte[.gz] is missing beside {}", dir.string(), prefix, images);
    return {images, labels};
  }
  std::string where;
  for (const auto& dir : dirs) where += (where.empty() ? "" : " or ") + dir.string();
  throw Error("{} not found in {}: run scripts/fetch_data.sh (or set data.dir / POPKIT_DATA_DIR)", what, where);
}

std::vector<std::filesystem::path> named_dirs(const config::Config& config) {
  const std::filesystem::path dir = data_dir(config.data);
  if (config.data.dataset == config::Dataset::kFashionMnist)
    return {dir / "fashion-mnist", "/usr/share/datasets/fashion-mnist"};
  return {dir / "mnist"};
}

const char* named_what(const config::Config& config) {
  return config.data.dataset == config::Dataset::kFashionMnist ? "Fashion-MNIST" : "MNIST";
}

Dataset load_named(const config::Config& config, Split split) {
  const std::string what = named_what(config);
  const IdxFiles files = find_named(named_dirs(config), what, split);
  Dataset d = read_idx(files.images, files.labels);
  d.name = what + (split == Split::kTrain ? " train" : " test");
  return d;
}

// The first 16 bytes of an IDX image file (inflated when gzip): magic, n, rows, cols.
std::optional<planner::DatasetSize> peek_idx_images(const std::string& path) {
  if (!input_file_problem(path).empty()) return std::nullopt;
  InputFile file = open_input_file(path);
  std::vector<std::uint8_t> head(64 * 1024);
  head.resize(file.read(head.data(), head.size()));
  const bool gzip = head.size() >= 2 && head[0] == 0x1f && head[1] == 0x8b;
  if (gzip) {
    std::vector<std::uint8_t> out(16);
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return std::nullopt;
    zs.next_in = head.data();
    zs.avail_in = static_cast<uInt>(head.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    while (zs.avail_out > 0 && inflate(&zs, Z_NO_FLUSH) == Z_OK) {
    }
    out.resize(out.size() - zs.avail_out);
    inflateEnd(&zs);
    head = std::move(out);
  }
  if (head.size() < 16 || read_be32(head, 0) != kIdxImagesMagic) return std::nullopt;
  const std::int64_t n = read_be32(head, 4);
  const std::int64_t pixels = std::int64_t{read_be32(head, 8)} * std::int64_t{read_be32(head, 12)};
  // A header the file cannot back is read_idx's to report (truncated), not a size: raw
  // files must match it, gzip cannot inflate more than 1032 times (deflate's limit).
  std::uint64_t need = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(pixels),
                             &need) ||
      __builtin_add_overflow(need, 16, &need))
    return std::nullopt;
  if (gzip ? need / 1032 > file.size() : need != file.size()) return std::nullopt;
  return planner::DatasetSize{n, pixels};
}

}  // namespace

std::optional<planner::DatasetSize> peek_dataset_size(const config::Config& config, Split split) {
  const config::Data& data = config.data;
  const bool train = split == Split::kTrain;
  switch (data.dataset) {
    case config::Dataset::kSynthetic: {
      const planner::DatasetSizes sizes = planner::dataset_sizes_from_config(config);
      return train ? sizes.train : sizes.test;
    }
    case config::Dataset::kIdx:
      return peek_idx_images(train ? data.train_images : data.test_images);
    case config::Dataset::kMnist:
    case config::Dataset::kFashionMnist:
      try {
        return peek_idx_images(find_named(named_dirs(config), named_what(config), split).images);
      } catch (const Error&) {
        return std::nullopt;  // load_dataset says what is missing
      }
  }
  return std::nullopt;
}

Dataset load_dataset(const config::Config& config, Split split) {
  const config::Data& data = config.data;
  switch (data.dataset) {
    case config::Dataset::kMnist:
    case config::Dataset::kFashionMnist:
      return load_named(config, split);
    case config::Dataset::kIdx:
      return split == Split::kTrain ? read_idx(data.train_images, data.train_labels)
                                    : read_idx(data.test_images, data.test_labels);
    case config::Dataset::kSynthetic: {
      const auto& shape = config.model.input_shape;
      const std::int64_t rows = shape.empty() ? 1 : shape.front();
      std::int64_t cols = 1;
      for (std::size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
      const int n_classes =
          config.model.layers.empty() ? kClasses : static_cast<int>(config.model.layers.back().out_features);
      Dataset d = make_synthetic(split == Split::kTrain ? data.synthetic_train : data.synthetic_test, rows, cols,
                                 config.training.seed, data.synthetic_noise, split == Split::kTrain ? 0 : 1,
                                 n_classes);
      d.name = split == Split::kTrain ? "synthetic train" : "synthetic test";
      return d;
    }
  }
  throw Error("unknown dataset");
}

}  // namespace popkit::engine
