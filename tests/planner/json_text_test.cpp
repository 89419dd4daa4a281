// JSON text for the file readers: errors at FILE:LINE:COLUMN with the line and a caret
// (exact text), numbers beyond a double, nesting limits, and arrays split off to a
// JsonSplit while the DOM keeps placeholders.
#include "planner/json_text.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace popkit::planner;
using nlohmann::json;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json(text, "f.json");
  } catch (const popkit::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Claims the arrays at one path pattern and records their elements as text.
class Recorder : public JsonSplit {
 public:
  explicit Recorder(std::vector<std::string_view> pattern) : pattern_(std::move(pattern)) {}

  std::optional<std::uint64_t> begin_array(const JsonPath& path) override {
    offered.push_back(path.str());
    bool match = false;
    switch (pattern_.size()) {
      case 1:
        match = path.matches({pattern_[0]});
        break;
      case 3:
        match = path.matches({pattern_[0], pattern_[1], pattern_[2]});
        break;
      default:
        break;
    }
    if (!match) return std::nullopt;
    arrays.push_back(path.str());
    return arrays.size() - 1 + 100;
  }
  void element(std::uint64_t array, std::size_t index, json&& value) override {
    elements.push_back(fmt::format("{}#{}: {}", array, index, value.dump()));
  }

  std::vector<std::string> offered;
  std::vector<std::string> arrays;
  std::vector<std::string> elements;

 private:
  std::vector<std::string_view> pattern_;
};

// Claims the array at key "a" and keeps its elements as parsed.
class Keeper : public JsonSplit {
 public:
  std::optional<std::uint64_t> begin_array(const JsonPath& path) override {
    if (!path.matches({"a"})) return std::nullopt;
    return 0;
  }
  void element(std::uint64_t /*array*/, std::size_t index, json&& value) override {
    BOOST_TEST(index == elements.size());
    elements.push_back(std::move(value));
  }
  std::vector<json> elements;
};

std::string claimed_error_of(const std::string& text) {
  Keeper keeper;
  try {
    parse_json(text, "f.json", {&keeper});
  } catch (const popkit::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(json_text)

BOOST_AUTO_TEST_CASE(parses_like_nlohmann) {
  const std::string text = R"({"a": [1, -2, 3.5, "x", null, true], "b": {"c": {}}, "a2": []})";
  BOOST_TEST(parse_json(text, "f.json") == json::parse(text));
  // A repeated key keeps its last value, as nlohmann's parser does.
  BOOST_TEST(parse_json(R"({"k": [1], "k": 2})", "f.json") == json::parse(R"({"k": 2})"));
  BOOST_TEST(parse_json("7", "f.json") == json(7));
}

BOOST_AUTO_TEST_CASE(syntax_errors_point_at_the_line_and_column) {
  // nlohmann's "last read" runs from the last token it reset at; the column is that of
  // the byte it stopped at (here the line break ending the literal).
  BOOST_TEST(error_of("{\n  \"a\": 1,\n  \"b\": tru\n}") ==
             "f.json:3:11: not JSON: syntax error while parsing value - invalid literal; last "
             "read: '\"b\": tru<U+000A>'\n"
             "  \"b\": tru\n"
             "          ^");
  BOOST_TEST(error_of("") ==
             "f.json:1:1: not JSON: syntax error while parsing value - unexpected end of input; "
             "expected '[', '{', or a literal");
  BOOST_TEST(error_of("{\"a\": 1}\n\nx") ==
             "f.json:3:1: not JSON: syntax error while parsing value - invalid literal; last read: "
             "'1}<U+000A><U+000A>x'; expected end of input\n"
             "x\n"
             "^");
}

BOOST_AUTO_TEST_CASE(text_that_cannot_begin_json_is_not_quoted) {
  // The password file named .json: nothing of it is printed.
  BOOST_TEST(error_of("\n  root:x:0:0:root:/root:/bin/bash\n") ==
             "f.json:2:3: not JSON: a JSON document begins with '{', '[', a string, a number, "
             "true, false or null");
}

BOOST_AUTO_TEST_CASE(numbers_beyond_a_double_are_errors_at_their_first_byte) {
  BOOST_TEST(error_of("{\n  \"x\": [1, -1e999]\n}") ==
             "f.json:2:12: number out of range: -1e999\n"
             "  \"x\": [1, -1e999]\n"
             "           ^");
  // Integers beyond 64 bits are read as doubles, as by nlohmann.
  BOOST_TEST(parse_json("18446744073709551616", "f.json") == json(18446744073709551616.0));
}

BOOST_AUTO_TEST_CASE(long_lines_and_tokens_are_cut) {
  const std::string pad(200, ' ');
  BOOST_TEST(error_of("[" + pad + "1e999" + pad + "]") ==
             "f.json:1:202: number out of range: 1e999\n"
             "..." +
                 std::string(60, ' ') + "1e999" + std::string(35, ' ') + "...\n" +
                 std::string(63, ' ') + "^");
  const std::string error = error_of("\"" + std::string(1000, 'a'));
  BOOST_TEST(error.find("last read: '\"" + std::string(39, 'a') + "...'") != std::string::npos,
             error);
  BOOST_TEST(error.size() < 400u);
  // Control bytes and bytes beyond ASCII print as '?', one column each.
  BOOST_TEST(error_of("[\"\xC3\xA9\",\t\x01]") ==
             "f.json:1:8: not JSON: syntax error while parsing value - invalid literal; last read: "
             "'\"\xC3\xA9\",<U+0009><U+0001>'\n"
             "[\"??\",\t?]\n"
             "      \t^");
}

BOOST_AUTO_TEST_CASE(nesting_is_limited) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  BOOST_TEST(parse_json(ok, "f.json").is_array());
  const std::string deep = "{\"a\":" + std::string(100000, '[');
  BOOST_TEST(error_of(deep).rfind("f.json:1:261: nesting deeper than 256 levels\n", 0) == 0u,
             error_of(deep).substr(0, 100));
}

BOOST_AUTO_TEST_CASE(claimed_arrays_go_to_the_split_element_by_element) {
  Recorder split({"p", "[]", "ops"});
  const std::string text =
      R"({"p": [{"ops": [{"k": [1, 2]}, 3, [4]], "n": 1}, {"ops": []}, {"ops": 5}], "ops": [6]})";
  const json dom = parse_json(text, "f.json", {&split});
  BOOST_TEST(split.arrays == (std::vector<std::string>{"p[0].ops", "p[1].ops"}),
             boost::test_tools::per_element());
  // Arrays inside a claimed array's elements are not offered.
  BOOST_TEST(split.offered == (std::vector<std::string>{"p", "p[0].ops", "p[1].ops", "ops"}),
             boost::test_tools::per_element());
  BOOST_TEST(split.elements ==
                 (std::vector<std::string>{R"(100#0: {"k":[1,2]})", "100#1: 3", "100#2: [4]"}),
             boost::test_tools::per_element());
  BOOST_TEST(is_placeholder(dom["p"][0]["ops"]));
  BOOST_TEST(dom["p"][0]["ops"].get_binary().subtype() == 100u);
  BOOST_TEST(dom["p"][1]["ops"].get_binary().subtype() == 101u);
  BOOST_TEST(dom["p"][0]["n"] == 1);
  BOOST_TEST(dom["p"][2]["ops"] == 5);  // not an array: stays in the DOM
  BOOST_TEST(dom["ops"] == json::parse("[6]"));
}

BOOST_AUTO_TEST_CASE(the_first_split_to_claim_an_array_gets_it) {
  Recorder first({"a"});
  Recorder second({"a"});
  Recorder other({"b"});
  const json dom = parse_json(R"({"a": [1], "b": [2]})", "f.json", {&first, &second, &other});
  BOOST_TEST(first.elements == std::vector<std::string>{"100#0: 1"},
             boost::test_tools::per_element());
  BOOST_TEST(second.elements.empty());
  BOOST_TEST(other.elements == std::vector<std::string>{"100#0: 2"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(split_arrays_keep_the_first_error_for_the_reader) {
  SplitArrays<int> arrays(1, 3);
  JsonPath path;
  path.push_key();
  path.set_key("xs");
  const std::uint64_t id = arrays.begin(path);
  BOOST_TEST(id == 1u);
  BOOST_TEST(arrays.owns(id));
  BOOST_TEST(!arrays.owns(2));
  int converted = 0;
  auto convert = [&](const json& v, const std::string& at) {
    ++converted;
    if (!v.is_number_integer()) throw popkit::Error("f.json: {}: expected an integer", at);
    return v.get<int>();
  };
  arrays.add(id, 0, json(1), convert);
  arrays.add(id, 1, json("x"), convert);
  arrays.add(id, 2, json("y"), convert);  // never reached by the reader: not converted
  BOOST_TEST(converted == 2);
  try {
    arrays.take(json::binary({}, id), "xs");
    BOOST_FAIL("no error");
  } catch (const popkit::Error& e) {
    BOOST_TEST(std::string(e.what()) == "f.json: xs[1]: expected an integer");
  }
}

// A claimed array's plain numbers are read without nlohmann's lexer (Builder::skim): the
// same values of the same types as nlohmann's, and the same errors at the same places.
BOOST_AUTO_TEST_CASE(claimed_numbers_read_as_nlohmann_reads_them) {
  const std::string numbers =
      "[0, -0, 7, -7, 18446744073709551615, 18446744073709551616, -9223372036854775808,\n"
      " -9223372036854775809, 1.0, -2.5e-3, 6.02E23, 1e+2, 0.1, 2.2250738585072014e-308,\n"
      " 4.9e-324, 1e-400, 1.7976931348623157e308, 0.30000000000000004, 123456789012345678901,\n"
      " \"x\", 3, {\"k\": [1, 2]}, 4 , 5\t,\r\n6, [7], 8]";
  Keeper keeper;
  const json dom = parse_json(R"({"a": )" + numbers + R"(, "b": [1, 2]})", "f.json", {&keeper});
  const json want = json::parse(numbers);
  BOOST_TEST_REQUIRE(keeper.elements.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST(keeper.elements[i] == want[i], "element " << i);
    BOOST_TEST(keeper.elements[i].type_name() == want[i].type_name(), "element " << i);
    BOOST_TEST((keeper.elements[i].type() == json::value_t::number_unsigned) ==
                   (want[i].type() == json::value_t::number_unsigned),
               "element " << i);
  }
  BOOST_TEST(dom["b"] == json::parse("[1, 2]"));
  // Many plain numbers, as a run file's losses: each the double strtod gives.
  std::mt19937_64 rng(3);
  std::string text = "{\"a\": [";
  std::vector<double> values;
  for (int i = 0; i < 2000; ++i) {
    const double v =
        std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 80) - 90);
    values.push_back(v);
    text += fmt::format("{}{}", i == 0 ? "" : ",\n  ", v);
  }
  text += "]}";
  Keeper many;
  parse_json(text, "f.json", {&many});
  BOOST_TEST_REQUIRE(many.elements.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    BOOST_TEST(many.elements[i].get<double>() == values[i], "element " << i);
  }
}

BOOST_AUTO_TEST_CASE(claimed_numbers_keep_errors_where_they_were) {
  for (const std::string bad : {
           R"({"a": [1, 2, 3, ]})",
           R"({"a": [1, 2, 3,, 4]})",
           R"({"a": [1, 2, tru, 4]})",
           R"({"a": [1, 2, 01, 4]})",
           R"({"a": [1, 2, 1., 4]})",
           R"({"a": [1, 2, -, 4]})",
           R"({"a": [1, 2 3, 4]})",
           "{\"a\": [1,\n 2,\n 1e999,\n 4]}",
           "{\"a\": [1,\n 2,\n 3,\n 4]",
           R"({"a": [1, 2, 3, 4]] })",
           R"({"a": [1, 2, 3, 4], "b": [1, 2, ]})",
       }) {
    const std::string plain = error_of(bad);
    BOOST_TEST(plain != "(no error)", bad);
    BOOST_TEST(claimed_error_of(bad) == plain, bad);
  }
}

BOOST_AUTO_TEST_SUITE_END()
