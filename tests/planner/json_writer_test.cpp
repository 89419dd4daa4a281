// JsonWriter: the streamed text is, byte for byte, what nlohmann's dump writes for the
// same document (empty and nested containers, every value type, DOM values nested at
// depth, strings that need escaping, doubles at the edges of each notation).
#include "planner/json_writer.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>

using namespace popkit::planner;
using nlohmann::json;

BOOST_AUTO_TEST_SUITE(json_writer)

BOOST_AUTO_TEST_CASE(the_text_is_a_doms_dump) {
  for (const int indent : {1, 2}) {
    std::ostringstream out;
    {
      JsonWriter w(out, indent);
      w.begin_object();
      w.key("a_empty_array").begin_array().end_array();
      w.key("b_empty_object").begin_object().end_object();
      w.key("c_values").begin_array();
      w.value(std::int64_t{-7}).value(std::uint64_t{18446744073709551615ULL}).value(3);
      w.value(true).value(false).value(0.1).value("text").value(std::string("more"));
      w.end_array();
      w.key("d_dom").value(json{{"x", {1, 2, json::object()}}, {"y", "z"}});
      w.key("e_nested").begin_object().key("inner").begin_array();
      w.begin_object().key("k").values(std::vector<int>{1, 2}).end_object();
      w.values(std::vector<std::string>{});
      w.end_array().end_object();
      w.key("f \"escaped\" key\n").value("tab\there, quote \" backslash \\ and \xc3\xa9");
      w.end_object();
      w.finish();
    }
    const std::string text = out.str();
    BOOST_TEST(json::parse(text).dump(indent) == text);
    BOOST_TEST(json::parse(text)["c_values"][1].get<std::uint64_t>() == 18446744073709551615ULL);
  }
}

BOOST_AUTO_TEST_CASE(doubles_read_as_nlohmann_writes_them) {
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                3.0,
                                0.1,
                                1e-5,
                                1e-4,
                                1e15,
                                1e16,
                                123456789012345678.0,
                                1.5e300,
                                -2.5e-300,
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity()};
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-30.0, 30.0);
  for (int i = 0; i < 1000; ++i) values.push_back(std::pow(10.0, exponent(rng)));
  for (const double v : values) {
    std::ostringstream out;
    {
      JsonWriter w(out);
      w.value(v);
      w.finish();
    }
    BOOST_TEST(out.str() == json(v).dump(), "" << v);
  }
}

BOOST_AUTO_TEST_CASE(large_documents_reach_the_stream_whole) {
  std::ostringstream out;
  json dom = json::array();
  {
    JsonWriter w(out);
    w.begin_array();
    for (int i = 0; i < 200000; ++i) {
      const std::string name = "item" + std::to_string(i);
      w.begin_object().key("i").value(i).key("name").value(name).end_object();
      dom.push_back({{"i", i}, {"name", name}});
    }
    w.end_array();
    w.finish();
  }
  BOOST_TEST(out.str().size() > (std::size_t{4} << 20));  // several spills of the buffer
  BOOST_TEST(out.str() == dom.dump(1));
}

BOOST_AUTO_TEST_SUITE_END()
