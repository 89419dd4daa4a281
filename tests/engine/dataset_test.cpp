// IDX reading over good files (raw and gzip) and every bad-file case, on small files
// the tests make themselves; and the synthetic set's determinism.
#include "engine/data/dataset.h"

#include <sys/stat.h>
#include <zlib.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"

namespace fs = std::filesystem;
using popkit::Error;
using popkit::engine::Dataset;
using popkit::engine::read_idx;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("popkit-idx-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static inline int counter = 0;
};

Dataset tiny() {
  Dataset d;
  d.n = 3;
  d.rows = 2;
  d.cols = 2;
  d.images = {0, 1, 2, 3, 10, 11, 12, 13, 250, 251, 252, 255};
  d.labels = {7, 0, 9};
  return d;
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void gzip_file(const std::string& from, const std::string& to) {
  const std::vector<char> bytes = slurp(from);
  gzFile gz = gzopen(to.c_str(), "wb");
  gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(gz);
}

// A gzip file holding `header` and then `zeros` zero bytes, written in 1 MiB pieces so
// that neither the test nor the file needs the inflated size in memory.
void gzip_header_and_zeros(const std::string& to, const std::vector<char>& header,
                           std::size_t zeros) {
  gzFile gz = gzopen(to.c_str(), "wb9");
  gzwrite(gz, header.data(), static_cast<unsigned>(header.size()));
  const std::vector<char> block(1 << 20, 0);
  for (std::size_t left = zeros; left > 0;) {
    const std::size_t n = std::min(left, block.size());
    gzwrite(gz, block.data(), static_cast<unsigned>(n));
    left -= n;
  }
  gzclose(gz);
}

// A big-endian IDX header: the magic number, then each dimension.
std::vector<char> idx_header(std::uint32_t magic, const std::vector<std::uint32_t>& dims) {
  std::vector<char> out;
  const auto put = [&out](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
  };
  put(magic);
  for (const std::uint32_t d : dims) put(d);
  return out;
}

// Runs read_idx and returns the error message (empty when it succeeded).
std::string error_of(const std::string& images, const std::string& labels) {
  try {
    read_idx(images, labels);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Files {
  TempDir dir;
  std::string images = dir.file("images.idx");
  std::string labels = dir.file("labels.idx");
  Files() {
    popkit::engine::write_idx_images(images, tiny());
    popkit::engine::write_idx_labels(labels, tiny());
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(idx)

BOOST_AUTO_TEST_CASE(reads_raw_files_exactly) {
  Files f;
  const Dataset d = read_idx(f.images, f.labels);
  BOOST_TEST(d.n == 3);
  BOOST_TEST(d.rows == 2);
  BOOST_TEST(d.cols == 2);
  BOOST_TEST(d.images == tiny().images);
  BOOST_TEST(d.labels == tiny().labels);
}

BOOST_AUTO_TEST_CASE(reads_gzip_files_exactly) {
  Files f;
  gzip_file(f.images, f.images + ".gz");
  gzip_file(f.labels, f.labels + ".gz");
  const Dataset d = read_idx(f.images + ".gz", f.labels + ".gz");
  BOOST_TEST(d.images == tiny().images);
  BOOST_TEST(d.labels == tiny().labels);
}

BOOST_AUTO_TEST_CASE(missing_file_is_named) {
  Files f;
  BOOST_TEST(error_of(f.dir.file("nope.idx"), f.labels) ==
             f.dir.file("nope.idx") + ": no such file");
}

BOOST_AUTO_TEST_CASE(directory_is_refused) {
  Files f;
  BOOST_TEST(error_of(f.dir.path.string(), f.labels) ==
             f.dir.path.string() + ": is a directory; expected an IDX file (raw or .gz)");
}

// /dev/zero never ends and a FIFO without a writer blocks: both are refused from the
// descriptor's type, before any byte is read.
BOOST_AUTO_TEST_CASE(device_is_refused) {
  Files f;
  BOOST_TEST(error_of("/dev/zero", f.labels) ==
             "/dev/zero: is not a regular file (a character device); expected an IDX file (raw "
             "or .gz)");
  BOOST_TEST(error_of(f.images, "/dev/zero") ==
             "/dev/zero: is not a regular file (a character device); expected an IDX file (raw "
             "or .gz)");
}

BOOST_AUTO_TEST_CASE(fifo_is_refused_without_blocking) {
  Files f;
  const std::string fifo = f.dir.file("fifo.idx");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  BOOST_TEST(error_of(fifo, f.labels) ==
             fifo + ": is not a regular file (a FIFO); expected an IDX file (raw or .gz)");
}

BOOST_AUTO_TEST_CASE(wrong_magic_number) {
  Files f;
  // A label file given as the image file: magic 2049 where 2051 belongs.
  BOOST_TEST(error_of(f.labels, f.labels) ==
             f.labels + ": wrong magic number 2049 (an IDX image file has 2051)");
  BOOST_TEST(error_of(f.images, f.images) ==
             f.images + ": wrong magic number 2051 (an IDX label file has 2049)");
}

BOOST_AUTO_TEST_CASE(truncated_images) {
  Files f;
  std::vector<char> bytes = slurp(f.images);
  bytes.resize(bytes.size() - 5);
  spit(f.images, bytes);
  BOOST_TEST(error_of(f.images, f.labels) ==
             f.images +
                 ": truncated: header says 3 images of 2x2 (28 bytes) but the file has 23 bytes");
}

BOOST_AUTO_TEST_CASE(truncated_header) {
  Files f;
  spit(f.images, {0, 0, 8, 3, 0});
  BOOST_TEST(error_of(f.images, f.labels) ==
             f.images + ": truncated: 5 bytes, an IDX image header needs 16");
}

BOOST_AUTO_TEST_CASE(truncated_gzip) {
  Files f;
  gzip_file(f.images, f.images + ".gz");
  std::vector<char> bytes = slurp(f.images + ".gz");
  bytes.resize(bytes.size() / 2);
  spit(f.images + ".gz", bytes);
  BOOST_TEST(error_of(f.images + ".gz", f.labels) == f.images + ".gz: truncated gzip data");
}

// A header for one 28x28 image followed by 64 MiB of zeros (64 KiB of gzip): inflating
// stops at the first byte past the 800 the header allows, so memory stays at a few KiB
// whatever the stream holds.
BOOST_AUTO_TEST_CASE(gzip_stops_inflating_past_the_header_size) {
  Files f;
  const std::string images = f.dir.file("bomb-images.gz");
  gzip_header_and_zeros(images, idx_header(2051, {1, 28, 28}), std::size_t{64} << 20);
  BOOST_TEST(error_of(images, f.labels) ==
             images +
                 ": trailing data: header says 1 images of 28x28 (800 bytes) but the gzip data "
                 "inflates to more");
  const std::string labels = f.dir.file("bomb-labels.gz");
  gzip_header_and_zeros(labels, idx_header(2049, {3}), std::size_t{64} << 20);
  BOOST_TEST(error_of(f.images, labels) ==
             labels +
                 ": trailing data: header says 3 labels (11 bytes) but the gzip data inflates "
                 "to more");
}

// Bytes after the end of the gzip stream (another gzip member, or junk) are refused like
// bytes past the end of a raw file.
BOOST_AUTO_TEST_CASE(gzip_trailing_bytes_after_the_stream) {
  Files f;
  gzip_file(f.labels, f.labels + ".gz");
  std::vector<char> bytes = slurp(f.labels + ".gz");
  for (const char c : std::string("junk")) bytes.push_back(c);
  spit(f.labels + ".gz", bytes);
  BOOST_TEST(error_of(f.images, f.labels + ".gz") ==
             f.labels + ".gz: trailing data: 4 bytes after the end of the gzip stream");
}

// Dimensions whose product passes what an IDX file may hold (here 2^48 bytes) are refused
// from the header, in raw and gzip files alike.
BOOST_AUTO_TEST_CASE(header_claims_beyond_the_limit) {
  Files f;
  const std::vector<char> header = idx_header(2051, {0xFFFFFFFF, 0x100, 0x100});
  spit(f.images, header);
  const std::string want =
      ": header says 4294967295 images of 256x256, more than the 4294967296 bytes an "
      "IDX file may have";
  BOOST_TEST(error_of(f.images, f.labels) == f.images + want);
  gzip_header_and_zeros(f.images + ".gz", header, 1 << 20);
  BOOST_TEST(error_of(f.images + ".gz", f.labels) == f.images + ".gz" + want);
  // No images, but each would have 2^64 - 2^33 + 1 pixels (Dataset::image_size is int64):
  // found by the idx fuzz target (corpus/idx/regression-image-size-overflow).
  spit(f.images, idx_header(2051, {0, 0xFFFFFFFF, 0xFFFFFFFF}));
  Dataset none = tiny();
  none.n = 0;
  none.labels.clear();
  popkit::engine::write_idx_labels(f.labels, none);
  BOOST_TEST(error_of(f.images, f.labels) ==
             f.images +
                 ": image size 4294967295x4294967295 is more than the 4294967296 bytes an IDX "
                 "file may have");
}

BOOST_AUTO_TEST_CASE(count_mismatch) {
  Files f;
  Dataset two = tiny();
  two.n = 2;
  two.labels.resize(2);
  popkit::engine::write_idx_labels(f.labels, two);
  BOOST_TEST(error_of(f.images, f.labels) ==
             f.images + " has 3 images but " + f.labels + " has 2 labels");
}

BOOST_AUTO_TEST_CASE(label_out_of_range) {
  Files f;
  Dataset bad = tiny();
  bad.labels[1] = 10;
  popkit::engine::write_idx_labels(f.labels, bad);
  BOOST_TEST(error_of(f.images, f.labels) ==
             f.labels + ": label 10 of sample 1 is not a class 0-9");
}

BOOST_AUTO_TEST_CASE(trailing_data) {
  Files f;
  std::vector<char> bytes = slurp(f.labels);
  bytes.push_back(1);
  spit(f.labels, bytes);
  BOOST_TEST(error_of(f.images, f.labels) ==
             f.labels +
                 ": trailing data: header says 3 labels (11 bytes) but the file has 12 bytes");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(synthetic)

BOOST_AUTO_TEST_CASE(same_seed_same_data) {
  const Dataset a = popkit::engine::make_synthetic(100, 28, 28, 7, 0.5);
  const Dataset b = popkit::engine::make_synthetic(100, 28, 28, 7, 0.5);
  const Dataset c = popkit::engine::make_synthetic(100, 28, 28, 8, 0.5);
  BOOST_TEST(a.images == b.images);
  BOOST_TEST(a.labels == b.labels);
  BOOST_TEST(a.images != c.images);
  BOOST_TEST(a.images.size() == 100u * 784u);
}

BOOST_AUTO_TEST_CASE(every_class_appears_and_labels_are_valid) {
  const Dataset a = popkit::engine::make_synthetic(1000, 28, 28, 1, 0.5);
  std::vector<int> counts(10, 0);
  for (auto l : a.labels) {
    BOOST_REQUIRE(l < 10);
    ++counts[l];
  }
  for (int c : counts) BOOST_TEST(c > 50);
}

BOOST_AUTO_TEST_CASE(classes_are_separable_by_nearest_class_mean) {
  // Learnable: the mean image of each class, taken from one half, classifies the other
  // half far above chance (10%).
  const Dataset a = popkit::engine::make_synthetic(2000, 28, 28, 3, 0.5);
  const std::int64_t size = a.image_size();
  std::vector<double> mean(10 * size, 0.0);
  std::vector<int> count(10, 0);
  for (std::int64_t i = 0; i < 1000; ++i) {
    ++count[a.labels[i]];
    for (std::int64_t k = 0; k < size; ++k) mean[a.labels[i] * size + k] += a.image(i)[k];
  }
  for (int c = 0; c < 10; ++c)
    for (std::int64_t k = 0; k < size; ++k) mean[c * size + k] /= count[c];
  int correct = 0;
  for (std::int64_t i = 1000; i < 2000; ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int c = 0; c < 10; ++c) {
      double dist = 0;
      for (std::int64_t k = 0; k < size; ++k) {
        const double diff = a.image(i)[k] - mean[c * size + k];
        dist += diff * diff;
      }
      if (dist < best_d) best_d = dist, best = c;
    }
    correct += best == a.labels[i];
  }
  BOOST_TEST(correct > 900);
}

BOOST_AUTO_TEST_SUITE_END()
