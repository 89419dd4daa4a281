// The reporters on a tiny table: alignment, folding, csv quoting, json numbers.
#include "reports/table.h"

#include <boost/test/unit_test.hpp>
#include <sstream>

#include "reports/input_error.h"

namespace r = popkit::reports;

namespace {

r::Table tiny() {
  r::Table t;
  t.key = "tiny";
  t.title = "Tiny";
  t.columns = {{"case", "Case", false}, {"mode", "Mode", false}, {"bytes", "Bytes", true}};
  t.rows = {{{"a", {}}, {"phased", {}}, {"1.00 KiB", 1024.0}},
            {{"b, c", {}}, {"phased", {}}, {"512 B", 512.0}}};
  return t;
}

std::string render(const r::Table& t, r::Format f) {
  std::ostringstream out;
  r::write_report(r::Report{{t}}, f, out);
  return out.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(table)

BOOST_AUTO_TEST_CASE(text_aligns_columns_and_numbers_right) {
  BOOST_TEST(render(tiny(), r::Format::kText) ==
             "Tiny\n"
             "\n"
             "Case  Mode       Bytes\n"
             "----  ------  --------\n"
             "a     phased  1.00 KiB\n"
             "b, c  phased     512 B\n");
}

BOOST_AUTO_TEST_CASE(equal_columns_fold_into_a_header_line) {
  r::Table t = tiny();
  r::fold_equal_columns(t, {"case"});
  BOOST_TEST(t.columns.size() == 2u);
  BOOST_TEST(render(t, r::Format::kText) ==
             "Tiny\n"
             "  Mode: phased\n"
             "\n"
             "Case     Bytes\n"
             "----  --------\n"
             "a     1.00 KiB\n"
             "b, c     512 B\n");
  BOOST_TEST(render(t, r::Format::kMarkdown) ==
             "### Tiny\n"
             "\n"
             "- Mode: phased\n"
             "\n"
             "| Case | Bytes |\n"
             "|:---|---:|\n"
             "| a | 1.00 KiB |\n"
             "| b, c | 512 B |\n");
  // Machines get the flat table back, numbers raw, columns in their first order.
  BOOST_TEST(render(t, r::Format::kCsv) ==
             "case,mode,bytes\n"
             "a,phased,1024\n"
             "\"b, c\",phased,512\n");
  BOOST_TEST(render(t, r::Format::kJson) ==
             "{\n"
             "  \"tables\": [\n"
             "    {\n"
             "      \"key\": \"tiny\",\n"
             "      \"title\": \"Tiny\",\n"
             "      \"notes\": [],\n"
             "      \"rows\": [\n"
             "        {\n"
             "          \"case\": \"a\",\n"
             "          \"mode\": \"phased\",\n"
             "          \"bytes\": 1024\n"
             "        },\n"
             "        {\n"
             "          \"case\": \"b, c\",\n"
             "          \"mode\": \"phased\",\n"
             "          \"bytes\": 512\n"
             "        }\n"
             "      ]\n"
             "    }\n"
             "  ]\n"
             "}\n");
}

BOOST_AUTO_TEST_CASE(formats_parse_by_name) {
  BOOST_TEST((r::parse_format("markdown") == r::Format::kMarkdown));
  try {
    r::parse_format("xml");
    BOOST_FAIL("no error");
  } catch (const r::InputError& e) {
    BOOST_TEST(std::string(e.what()) ==
               "--format: \"xml\" is not a format (text, wide, markdown, csv, json)");
  }
}

BOOST_AUTO_TEST_SUITE_END()
