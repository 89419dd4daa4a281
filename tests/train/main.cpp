#define BOOST_TEST_MODULE train
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>

// The tests' scratch folders (helpers.h: scratch) go when the run ends.
struct RemoveScratch {
  ~RemoveScratch() {
    std::error_code ec;
    std::filesystem::remove_all(
        std::filesystem::temp_directory_path() / ("popkit-train-" + std::to_string(::getpid())),
        ec);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(RemoveScratch);
