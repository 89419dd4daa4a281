// Formatting quantities for tables and summaries: bytes, counts, seconds, changes.
#include <boost/test/unit_test.hpp>

#include "base/units.h"

using popkit::format_bytes;
using popkit::format_thousands;

BOOST_AUTO_TEST_SUITE(units)

BOOST_AUTO_TEST_CASE(bytes_pick_the_unit_by_size) {
  BOOST_TEST(format_bytes(0) == "0 B");
  BOOST_TEST(format_bytes(1023) == "1023 B");
  BOOST_TEST(format_bytes(1024) == "1.00 KiB");
  BOOST_TEST(format_bytes(1536) == "1.50 KiB");
  BOOST_TEST(format_bytes(900ull << 20) == "900.00 MiB");
  BOOST_TEST(format_bytes(3ull << 30) == "3.00 GiB");
  BOOST_TEST(format_bytes(5000ull << 30) == "5000.00 GiB");
}

BOOST_AUTO_TEST_CASE(thousands_are_separated) {
  BOOST_TEST(format_thousands(0) == "0");
  BOOST_TEST(format_thousands(999) == "999");
  BOOST_TEST(format_thousands(1000) == "1,000");
  BOOST_TEST(format_thousands(1234567.8) == "1,234,568");
  BOOST_TEST(format_thousands(1234.5678, 2) == "1,234.57");
  BOOST_TEST(format_thousands(-1234567) == "-1,234,567");
}

// A slow plan's rate keeps three digits (a GPT-2 XL step on 16 IPUs was "2 samples/s").
BOOST_AUTO_TEST_CASE(rates_keep_three_digits) {
  using popkit::format_rate;
  BOOST_TEST(format_rate(85202.4) == "85,202");
  BOOST_TEST(format_rate(123.4) == "123");
  BOOST_TEST(format_rate(42.26) == "42.3");
  BOOST_TEST(format_rate(2.391) == "2.39");
  BOOST_TEST(format_rate(0.1527) == "0.153");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(units)  // reopened: byte differences, seconds, changes

BOOST_AUTO_TEST_CASE(differences_seconds_and_changes) {
  using namespace popkit;
  BOOST_TEST(format_byte_difference(7, 7) == "0 B");
  BOOST_TEST(format_byte_difference(1536, 0) == "+1.50 KiB");
  BOOST_TEST(format_byte_difference(0, 512) == "-512 B");
  BOOST_TEST(format_byte_difference(0, 9223372036854775808u) == "-8589934592.00 GiB");
  BOOST_TEST(format_byte_difference(18446744073709551615u, 0) == "+17179869184.00 GiB");
  BOOST_TEST(format_seconds(0) == "0 s");
  BOOST_TEST(format_seconds(1.5) == "1.500 s");
  BOOST_TEST(format_seconds(0.0123) == "12.300 ms");
  BOOST_TEST(format_seconds(4.2e-5) == "42.0 µs");
  BOOST_TEST(format_change(0.05) == "+5.0%");
  BOOST_TEST(format_change(-0.073) == "-7.3%");
  BOOST_TEST(format_change(0.0) == "+0.0%");
}

BOOST_AUTO_TEST_SUITE_END()
