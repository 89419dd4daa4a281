// poprun calibrate's fit of the caches' ramps (runner/calibrate.h fit_ramp) on sweeps
// whose times are made up, so the ends and the fractions are known.
#include "runner/calibrate.h"

#include <boost/test/unit_test.hpp>
#include <cmath>

namespace tt = boost::test_tools;
using popkit::runner::CacheSweep;
using popkit::runner::fit_ramp;

namespace {

constexpr double kMiB = 1 << 20;

// Sets of 1, 2, 4, ... 32 MiB with these times (µs).
CacheSweep sweep(std::initializer_list<double> micros) {
  CacheSweep s;
  double bytes = kMiB;
  for (const double t : micros) {
    s.points.push_back({bytes, t * 1e-6, 0.0});
    bytes *= 2;
  }
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(calibration_fit)

// Warm up to 2 MiB, cold from 16 MiB, linear in log between: the quarter and
// three-quarter points fall at 2^1.75 and 2^3.25 MiB, and the line through them meets 0
// and 1 at the ends.
BOOST_AUTO_TEST_CASE(a_ramp_linear_in_log_gives_back_its_ends) {
  CacheSweep s = sweep({100, 100, 200, 300, 400, 400});
  const auto r = fit_ramp(s);
  BOOST_TEST(r.warm_bytes / kMiB == 2.0, tt::tolerance(1e-9));
  BOOST_TEST(r.cold_bytes / kMiB == 16.0, tt::tolerance(1e-9));
  BOOST_TEST(r.extra_seconds == 300e-6, tt::tolerance(1e-9));
  BOOST_TEST(s.points[2].cold_fraction == 1.0 / 3, tt::tolerance(1e-9));
  BOOST_TEST(s.points[5].cold_fraction == 1.0, tt::tolerance(1e-9));
}

// A step between two sets (noise of a few µs around it): the ramp spans those two sets.
BOOST_AUTO_TEST_CASE(a_step_falls_between_its_two_sets) {
  CacheSweep s = sweep({100, 101, 100, 400, 402, 400});
  const auto r = fit_ramp(s);
  BOOST_TEST(r.warm_bytes / kMiB == 4.0, tt::tolerance(1e-9));
  BOOST_TEST(r.cold_bytes / kMiB == 8.0, tt::tolerance(1e-9));
}

// Nothing turned cold (caches larger than the sweep): no ramp, so no term.
BOOST_AUTO_TEST_CASE(no_slower_set_gives_no_ramp) {
  CacheSweep s = sweep({100, 99, 101, 100, 98, 97});
  const auto r = fit_ramp(s);
  BOOST_TEST(r.cold_bytes == 0.0);
  BOOST_TEST(r.extra_seconds == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
