// libFuzzer target for the IDX reader (engine/data/dataset.h: parse_idx), raw and gzip:
// any bytes must give a Dataset or a popkit::Error, never a crash, hang, sanitizer
// report or memory beyond what the input can claim. One input holds both files: its
// first 4 bytes (little-endian) are the length of the image file, which follows; the
// label file is the rest. A length past the end takes everything as the image file.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "engine/data/dataset.h"

namespace {

// POPKIT_FUZZ_VERBOSE=1 prints each input's outcome: to see what a corpus reaches.
bool verbose() {
  static const bool on = std::getenv("POPKIT_FUZZ_VERBOSE") != nullptr;
  return on;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t images_size = 0;
  for (std::size_t i = 0; i < 4 && i < size; ++i) images_size |= std::size_t{data[i]} << (8 * i);
  const std::string_view rest = input.substr(size < 4 ? size : 4);
  const std::string_view images = rest.substr(0, images_size);
  const std::string_view labels = rest.substr(images.size());
  using namespace popkit::engine;
  try {
    const Dataset d = parse_idx(images, labels, "images.idx", "labels.idx");
    // What the reader promises the engine.
    POPKIT_ASSERT(d.n >= 0 && d.rows >= 1 && d.cols >= 1);
    POPKIT_ASSERT(d.images.size() == static_cast<std::size_t>(d.n * d.image_size()));
    POPKIT_ASSERT(d.labels.size() == static_cast<std::size_t>(d.n));
    for (const std::uint8_t label : d.labels) POPKIT_ASSERT(label < kClasses);
  } catch (const popkit::Error& e) {
    if (verbose()) std::fprintf(stderr, "%s\n", e.what());
  }
  return 0;
}
