// IDX reading (raw or gzip) with checks that name the file, and the synthetic set.
#include "engine/data/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <span>

#include "base/error.h"
#include "base/input_file.h"
#include "config/layer_kinds.h"
#include "engine/data/text_dataset.h"
#include "engine/tensor/random.h"

namespace popkit::engine {
namespace {

constexpr const char* kIdxHint = "expected an IDX file (raw or .gz)";

enum class IdxKind { kImages, kLabels };

// The fixed part of each kind of IDX file.
struct IdxLayout {
  std::uint32_t magic;
  std::size_t header;  // bytes: the magic number and one 32-bit count per dimension
  const char* what;
};

IdxLayout layout(IdxKind kind) {
  return kind == IdxKind::kImages ? IdxLayout{kIdxImagesMagic, 16, "image"}
                                  : IdxLayout{kIdxLabelsMagic, 8, "label"};
}

std::uint32_t read_be32(std::span<const std::uint8_t> bytes, std::size_t offset) {
  return (std::uint32_t{bytes[offset]} << 24) | (std::uint32_t{bytes[offset + 1]} << 16) |
         (std::uint32_t{bytes[offset + 2]} << 8) | std::uint32_t{bytes[offset + 3]};
}

void put_be32(std::ofstream& out, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.write(b, 4);
}

// What a complete header says: the counts, and the size of the whole file (header
// included) when it is at most kMaxIdxBytes.
struct IdxHeader {
  std::uint64_t n = 0, rows = 1, cols = 1;
  std::optional<std::uint64_t> size;  // empty: more than kMaxIdxBytes (or 2^64)
};

// The header of `bytes`, once they hold all of it; empty before that.
std::optional<IdxHeader> header_of(std::span<const std::uint8_t> bytes, IdxKind kind) {
  if (bytes.size() < layout(kind).header) return std::nullopt;
  IdxHeader h;
  h.n = read_be32(bytes, 4);
  if (kind == IdxKind::kImages) {
    h.rows = read_be32(bytes, 8);
    h.cols = read_be32(bytes, 12);
  }
  // size = header + n * rows * cols, each factor below 2^32: the product may pass 2^64.
  // One image alone must fit too (so rows * cols fits Dataset's int64), even when n is 0.
  const std::uint64_t room = kMaxIdxBytes - layout(kind).header;
  std::uint64_t payload = 0;
  if (h.rows * h.cols <= room && !__builtin_mul_overflow(h.n, h.rows * h.cols, &payload) &&
      payload <= room)
    h.size = layout(kind).header + payload;
  return h;
}

// Inflates a gzip stream, but only as far as the IDX header inside it allows: the output
// stops one byte past the size the header claims (`cut` says so), or at the header when
// its magic number or its claim is wrong (the checks after say which). Truncated,
// corrupt streams and bytes after the stream's end are errors.
std::vector<std::uint8_t> gunzip_idx(std::string_view in, const std::string& path, IdxKind kind,
                                     bool& cut) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  struct Stream {
    z_stream zs{};
    bool open = false;
    ~Stream() {
      if (open) inflateEnd(&zs);
    }
  } stream;
  z_stream& zs = stream.zs;
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error("{}: cannot start gzip decoder", path);
  stream.open = true;
  // zlib takes at most 4 GiB - 1 per call: the input is fed in pieces.
  const auto* next = reinterpret_cast<const Bytef*>(in.data());
  std::size_t left = in.size();
  std::vector<std::uint8_t> out;
  cut = false;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    // How many bytes to have after this call: the header first, then its claim + 1.
    std::uint64_t want = layout(kind).header;
    if (out.size() >= want) {
      const std::optional<IdxHeader> h = header_of(out, kind);
      if (read_be32(out, 0) != layout(kind).magic || !h->size) break;
      if (out.size() > *h->size) {
        cut = true;
        break;
      }
      want = *h->size + 1;
    }
    if (zs.avail_in == 0 && left > 0) {
      const auto piece =
          static_cast<uInt>(std::min<std::size_t>(left, std::numeric_limits<uInt>::max()));
      zs.next_in = const_cast<Bytef*>(next);
      zs.avail_in = piece;
      next += piece;
      left -= piece;
    }
    const std::size_t old = out.size();
    const auto grow = static_cast<std::size_t>(std::min<std::uint64_t>(want - old, kChunk));
    out.resize(old + grow);
    zs.next_out = out.data() + old;
    zs.avail_out = static_cast<uInt>(grow);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(old + grow - zs.avail_out);
    const bool input_ended = zs.avail_in == 0 && left == 0;
    if (rc == Z_BUF_ERROR || (rc == Z_OK && input_ended && zs.avail_out != 0))
      throw Error("{}: truncated gzip data", path);  // the input ended inside the stream
    if (rc != Z_OK && rc != Z_STREAM_END) throw Error("{}: corrupt gzip data", path);
  }
  if (rc == Z_STREAM_END && zs.avail_in + left > 0)
    throw Error("{}: trailing data: {} bytes after the end of the gzip stream", path,
                zs.avail_in + left);
  return out;
}

// The IDX bytes of one file (inflated when gzip), checked as far as one file can be:
// magic number, header length, dimensions, size. Returns the header's counts.
struct IdxPart {
  IdxHeader header;
  std::vector<std::uint8_t> bytes;  // the whole file, header included
};

IdxPart idx_part(std::string_view raw, const std::string& path, IdxKind kind) {
  const IdxLayout l = layout(kind);
  IdxPart part;
  bool cut = false;
  const bool gzip = raw.size() >= 2 && static_cast<std::uint8_t>(raw[0]) == 0x1f &&
                    static_cast<std::uint8_t>(raw[1]) == 0x8b;
  if (gzip)
    part.bytes = gunzip_idx(raw, path, kind, cut);
  else
    part.bytes.assign(raw.begin(), raw.end());
  const std::vector<std::uint8_t>& b = part.bytes;
  // The magic number first (a label file given as images is named as such), then the size.
  if (b.size() >= 4 && read_be32(b, 0) != l.magic)
    throw Error("{}: wrong magic number {} (an IDX {} file has {})", path, read_be32(b, 0), l.what,
                l.magic);
  const std::optional<IdxHeader> h = header_of(b, kind);
  if (!h)
    throw Error("{}: truncated: {} bytes, an IDX {} header needs {}", path, b.size(), l.what,
                l.header);
  part.header = *h;
  const std::string claim = kind == IdxKind::kImages
                                ? fmt::format("{} images of {}x{}", h->n, h->rows, h->cols)
                                : fmt::format("{} labels", h->n);
  if (kind == IdxKind::kImages && (h->rows == 0 || h->cols == 0))
    throw Error("{}: image size {}x{} is empty", path, h->rows, h->cols);
  if (h->rows * h->cols > kMaxIdxBytes - l.header)
    throw Error("{}: image size {}x{} is more than the {} bytes an IDX file may have", path,
                h->rows, h->cols, kMaxIdxBytes);
  if (!h->size)
    throw Error("{}: header says {}, more than the {} bytes an IDX file may have", path, claim,
                kMaxIdxBytes);
  if (cut)
    throw Error("{}: trailing data: header says {} ({} bytes) but the gzip data inflates to more",
                path, claim, *h->size);
  if (b.size() != *h->size)
    throw Error("{}: {}: header says {} ({} bytes) but the file has {} bytes", path,
                b.size() < *h->size ? "truncated" : "trailing data", claim, *h->size, b.size());
  return part;
}

}  // namespace

Dataset parse_idx(std::string_view images, std::string_view labels, const std::string& images_name,
                  const std::string& labels_name) {
  const IdxPart img = idx_part(images, images_name, IdxKind::kImages);
  const IdxPart lab = idx_part(labels, labels_name, IdxKind::kLabels);
  if (lab.header.n != img.header.n)
    throw Error("{} has {} images but {} has {} labels", images_name, img.header.n, labels_name,
                lab.header.n);
  Dataset d;
  // Each count is below 2^32 and n x rows x cols <= kMaxIdxBytes: int64 holds them all.
  d.n = static_cast<std::int64_t>(img.header.n);
  d.rows = static_cast<std::int64_t>(img.header.rows);
  d.cols = static_cast<std::int64_t>(img.header.cols);
  d.images.assign(img.bytes.begin() + 16, img.bytes.end());
  d.labels.assign(lab.bytes.begin() + 8, lab.bytes.end());
  for (std::int64_t i = 0; i < d.n; ++i) {
    if (d.labels[static_cast<std::size_t>(i)] >= kClasses)
      throw Error("{}: label {} of sample {} is not a class 0-{}", labels_name,
                  d.labels[static_cast<std::size_t>(i)], i, kClasses - 1);
  }
  d.name = std::filesystem::path(images_name).filename().string();
  d.source = images_name;
  return d;
}

Dataset read_idx(const std::string& images_path, const std::string& labels_path) {
  // Both files are opened before either is read: a missing label file fails at once.
  InputFile images = open_input_file(images_path, kIdxHint);
  InputFile labels = open_input_file(labels_path, kIdxHint);
  const std::string img = images.read_all(kMaxIdxBytes, "IDX file");
  const std::string lab = labels.read_all(kMaxIdxBytes, "IDX file");
  return parse_idx(img, lab, images_path, labels_path);
}

void write_idx_images(const std::string& path, const Dataset& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("{}: cannot open for writing", path);
  put_be32(out, kIdxImagesMagic);
  put_be32(out, static_cast<std::uint32_t>(data.n));
  put_be32(out, static_cast<std::uint32_t>(data.rows));
  put_be32(out, static_cast<std::uint32_t>(data.cols));
  out.write(reinterpret_cast<const char*>(data.images.data()),
            static_cast<std::streamsize>(data.images.size()));
  if (!out) throw Error("{}: write failed", path);
}

void write_idx_labels(const std::string& path, const Dataset& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("{}: cannot open for writing", path);
  put_be32(out, kIdxLabelsMagic);
  put_be32(out, static_cast<std::uint32_t>(data.n));
  out.write(reinterpret_cast<const char*>(data.labels.data()),
            static_cast<std::streamsize>(data.labels.size()));
  if (!out) throw Error("{}: write failed", path);
}

Dataset make_synthetic(std::int64_t n, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                       double noise, std::uint64_t stream, int n_classes) {
  if (n_classes < 1 || n_classes > 256)
    throw Error("synthetic data: {} classes, need 1 to 256", n_classes);
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
    const auto label =
        static_cast<std::uint8_t>(splitmix64(samples) % static_cast<std::uint64_t>(n_classes));
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
  return (std::filesystem::path(home && *home ? home : ".") / ".cache" / "popkit" / "data")
      .string();
}

std::string text_path(const config::Data& data) {
  const std::filesystem::path path(data.path);
  return path.is_absolute() ? data.path : (std::filesystem::path(data_dir(data)) / path).string();
}

namespace {

// The IDX file `stem` in `dir`, raw or gzip; empty when neither exists. Whatever exists
// under the name is taken, so that a directory or a FIFO there is refused by read_idx
// with its reason rather than reported missing.
std::string find_idx(const std::filesystem::path& dir, const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"}) {
    std::error_code ec;
    if (std::filesystem::exists(dir / name, ec)) return (dir / name).string();
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
    if (images.empty())
      throw Error("{}: {}-images-idx3-ubyte[.gz] is missing beside {}", dir.string(), prefix,
                  labels);
    if (labels.empty())
      throw Error("{}: {}-labels-idx1-ubyte[.gz] is missing beside {}", dir.string(), prefix,
                  images);
    return {images, labels};
  }
  std::string where;
  for (const auto& dir : dirs) where += (where.empty() ? "" : " or ") + dir.string();
  throw Error(
      "{} not found in {}: run popkit-fetch-data (scripts/fetch_data.sh in a source tree), or "
      "set data.dir / POPKIT_DATA_DIR",
      what, where);
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
  const std::optional<IdxHeader> h = header_of(head, IdxKind::kImages);
  if (!h || read_be32(head, 0) != kIdxImagesMagic || !h->size) return std::nullopt;
  // A header the file cannot back is read_idx's to report (truncated), not a size: raw
  // files must match it, gzip cannot inflate more than 1032 times (deflate's limit).
  if (gzip ? *h->size / 1032 > file.size() : *h->size != file.size()) return std::nullopt;
  const auto n = static_cast<std::int64_t>(h->n);
  const auto pixels = static_cast<std::int64_t>(h->rows * h->cols);
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
    case config::Dataset::kText:
      return peek_text_split(text_path(data), data.sequence_length, data.validation_fraction,
                             split);
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
      // The last layer's width: its kind's (config/layer_kinds.h).
      const int n_classes = config.model.layers.empty()
                                ? kClasses
                                : static_cast<int>(config::layer_shapes(config.model).back().width);
      Dataset d = make_synthetic(
          split == Split::kTrain ? data.synthetic_train : data.synthetic_test, rows, cols,
          config.training.seed, data.synthetic_noise, split == Split::kTrain ? 0 : 1, n_classes);
      d.name = split == Split::kTrain ? "synthetic train" : "synthetic test";
      return d;
    }
    case config::Dataset::kText:
      return text_window_set(
          read_text(text_path(data), data.sequence_length, data.validation_fraction), split,
          data.sequence_length);
  }
  throw Error("unknown dataset");
}

}  // namespace popkit::engine
