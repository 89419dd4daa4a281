// The SVG chart: its size follows the content, and it is one well-formed svg element.
// (tests/reports/chart_render_test.sh renders it with rsvg-convert.)
#include "reports/chart.h"

#include <boost/test/unit_test.hpp>
#include <sstream>

#include "tests/reports/golden.h"

namespace r = popkit::reports;
using r::testing::fixtures;

BOOST_AUTO_TEST_SUITE(chart)

BOOST_AUTO_TEST_CASE(size_follows_the_panels) {
  // A run: memory (30 + 20 + 200 + 160), loss (30 + 160 + 40), time (30 + 26 x (3 phases + 1)).
  BOOST_TEST(r::chart_size(fixtures({"base.json"})).width == 800);
  BOOST_TEST(r::chart_size(fixtures({"base.json"})).height == 410 + 230 + 134);
  BOOST_TEST(r::chart_size(fixtures({"base.json", "fast.json"})).height == 2 * 774);
}

BOOST_AUTO_TEST_CASE(svg_is_one_element_with_the_declared_size) {
  std::ostringstream out;
  r::write_chart(fixtures({"base.json"}), out);
  const std::string svg = out.str();
  BOOST_TEST(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0) == 0u);
  BOOST_TEST(svg.find("width=\"800\" height=\"774\"") != std::string::npos);
  BOOST_TEST(svg.substr(svg.size() - 7) == "</svg>\n");
  BOOST_TEST(svg.find("<polyline") != std::string::npos);  // the loss curve
  BOOST_TEST(svg.find("fc2 forward+loss+backward+optimizer") != std::string::npos);
  const std::string golden = r::testing::golden("chart.svg", svg);
  BOOST_TEST(svg == golden);
}

BOOST_AUTO_TEST_SUITE_END()
