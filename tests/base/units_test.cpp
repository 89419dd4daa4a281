// Byte sizes: exact decimal and binary units, and the ways a size can be wrong.
#include "base/units.h"

#include <boost/test/unit_test.hpp>

#include "base/suggest.h"

using namespace popkit;

namespace {
std::uint64_t bytes(const char* text) {
  std::string error;
  const auto value = parse_bytes(text, error);
  BOOST_REQUIRE_MESSAGE(value, text << ": " << error);
  return *value;
}
std::string bytes_error(const char* text) {
  std::string error;
  BOOST_TEST(!parse_bytes(text, error).has_value());
  return error;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(units)

BOOST_AUTO_TEST_CASE(plain_integers_are_bytes) {
  BOOST_TEST(bytes("0") == 0u);
  BOOST_TEST(bytes("943718400") == 943718400u);
  BOOST_TEST(bytes("18446744073709551615") == 18446744073709551615u);
}

BOOST_AUTO_TEST_CASE(units_scale_exactly) {
  BOOST_TEST(bytes("900MiB") == 900u * 1024 * 1024);
  BOOST_TEST(bytes("900 MiB") == 900u * 1024 * 1024);
  BOOST_TEST(bytes("1.5GB") == 1500000000u);
  BOOST_TEST(bytes("1.5GiB") == 1610612736u);
  BOOST_TEST(bytes("0.5KiB") == 512u);
  BOOST_TEST(bytes(".25KB") == 250u);
  BOOST_TEST(bytes("2TiB") == 2ULL << 40);
  BOOST_TEST(bytes("1.000000000000000000000000GB") == 1000000000u);
  BOOST_TEST(bytes("12B") == 12u);
}

BOOST_AUTO_TEST_CASE(bad_sizes_say_why) {
  BOOST_TEST(bytes_error("1.5B") == "'1.5B' is not a whole number of bytes");
  BOOST_TEST(bytes_error("0.0001KB") == "'0.0001KB' is not a whole number of bytes");
  BOOST_TEST(bytes_error("18446744073709551616") ==
             "'18446744073709551616' does not fit in 64 bits of bytes");
  BOOST_TEST(bytes_error("20000000TiB") == "'20000000TiB' does not fit in 64 bits of bytes");
  BOOST_TEST(bytes_error("900MIB") ==
             "unknown unit 'MIB' in '900MIB'; did you mean 'MiB'? (units: B, KB, MB, GB, TB, "
             "KiB, MiB, GiB, TiB)");
  BOOST_TEST(bytes_error("-1") ==
             "'-1' is not a size; write bytes as an integer or with a unit, e.g. 900MiB (B, KB, "
             "MB, GB, TB, KiB, MiB, GiB, TiB)");
  BOOST_TEST(bytes_error("MiB").find("is not a size") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(suggestions_by_edit_distance) {
  BOOST_TEST(edit_distance("kitten", "sitting") == 3u);
  BOOST_TEST(edit_distance("", "abc") == 3u);
  BOOST_TEST(did_you_mean("factr", {"factor", "groupings"}) == "; did you mean 'factor'?");
  BOOST_TEST(did_you_mean("micro_batch", {"micro_batch_size", "seed"}) ==
             "; did you mean 'micro_batch_size'?");
  BOOST_TEST(did_you_mean("zzzzzz", {"factor", "groupings"}) == "");
}

BOOST_AUTO_TEST_SUITE_END()
