// The planner's text tables: rows that repeat with counting numbers fold into one row
// of brace ranges, and nothing else folds.
#include "planner/text_table.h"

#include <boost/test/unit_test.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "planner/fold_rows.h"

using namespace popkit::planner;

namespace {

// Rows as text, a cell a " | " and a row a line, for messages that show them.
std::string text(const std::vector<TextRow>& rows) {
  std::string out;
  for (const TextRow& r : rows) {
    for (std::size_t c = 0; c < r.size(); ++c) out += (c > 0 ? " | " : "") + r[c];
    out += '\n';
  }
  return out;
}

std::vector<TextRow> blocks(int n) {
  std::vector<TextRow> rows{{"wte", "[50257, 1600]"}};
  for (int i = 0; i < n; ++i) {
    rows.push_back({"h" + std::to_string(i) + ".qkv", "[1600, 4800]", "row " + std::to_string(i)});
    rows.push_back({"h" + std::to_string(i) + ".proj", "[1600, 1600]", "row " + std::to_string(i)});
  }
  rows.push_back({"ln_f", "[1600]"});
  return rows;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(text_table)

BOOST_AUTO_TEST_CASE(groups_that_count_fold_into_brace_ranges) {
  const FoldedRows f = fold_rows(blocks(48));
  BOOST_TEST(f.folded);
  const std::vector<TextRow> want{{"wte", "[50257, 1600]"},
                                  {"h{0..47}.qkv", "[1600, 4800]", "row {0..47}"},
                                  {"h{0..47}.proj", "[1600, 1600]", "row {0..47}"},
                                  {"ln_f", "[1600]"}};
  BOOST_TEST(text(f.rows) == text(want));
}

BOOST_AUTO_TEST_CASE(numbers_may_count_down_and_up_together) {
  std::vector<TextRow> rows;
  for (int i = 0; i < 4; ++i)
    rows.push_back({std::to_string(53 + i) + ": h" + std::to_string(47 - i) + " backward", "2 ms"});
  const FoldedRows f = fold_rows(rows);
  BOOST_TEST(f.rows.size() == 1u);
  BOOST_TEST(f.rows[0][0] == "{53..56}: h{47..44} backward");
  BOOST_TEST(f.rows[0][1] == "2 ms");
}

BOOST_AUTO_TEST_CASE(what_does_not_count_by_one_stays) {
  // Too few repeats, decimals or grouped numbers that differ, steps of two, identical
  // rows, and different words: each row stays as it was.
  const std::vector<std::vector<TextRow>> cases{
      {{"h0", "x"}, {"h1", "x"}},
      {{"h0", "1.25 GiB"}, {"h1", "1.26 GiB"}, {"h2", "1.27 GiB"}},
      {{"h0", "1,600"}, {"h1", "1,601"}, {"h2", "1,602"}},
      {{"h0", "x"}, {"h2", "x"}, {"h4", "x"}},
      {{"h0", "x"}, {"h0", "x"}, {"h0", "x"}},
      {{"h0", "x"}, {"h1", "y"}, {"h2", "x"}},
      {{"h0", "x"}, {"g1", "x"}, {"h2", "x"}},
  };
  for (const auto& rows : cases) {
    const FoldedRows f = fold_rows(rows);
    BOOST_TEST(!f.folded);
    BOOST_TEST(text(f.rows) == text(rows));
  }
}

BOOST_AUTO_TEST_CASE(a_run_stops_where_a_row_breaks_the_count) {
  const std::vector<TextRow> rows{{"h0", "7"}, {"h1", "7"}, {"h2", "7"}, {"h3", "8"}, {"h4", "7"}};
  const FoldedRows f = fold_rows(rows);
  const std::vector<TextRow> want{{"h{0..2}", "7"}, {"h3", "8"}, {"h4", "7"}};
  BOOST_TEST(text(f.rows) == text(want));
}

BOOST_AUTO_TEST_CASE(a_table_folds_within_a_width_and_lists_every_row_without_one) {
  TextTable t({"Name", "Shape", "Where"}, {false, false, false});
  t.fold_repeats();
  for (const TextRow& r : blocks(3)) t.add(r);
  std::ostringstream narrow;
  BOOST_TEST(t.print(narrow, "", 100));
  BOOST_TEST(narrow.str().find("h{0..2}.qkv  | [1600, 4800]  | row {0..2}\n") != std::string::npos);
  std::ostringstream all;
  BOOST_TEST(!t.print(all, "", 0));
  BOOST_TEST(all.str().find("h2.proj") != std::string::npos);
  BOOST_TEST(all.str().find('{') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(columns_left_out_to_fit_are_named) {
  TextTable t({"Name", "Shape", "Elements", "Dtype"}, {false, false, true, false}, 1,
              {false, false, true, true});
  t.add({"fc1.weight", "[784, 32]", "25088", "float32"});
  std::ostringstream narrow;
  t.print(narrow, "  ", 100);
  BOOST_TEST(narrow.str().find("25088") == std::string::npos);
  BOOST_TEST(
      narrow.str().find("  (left out to fit: Elements, Dtype; --format wide shows them)\n") !=
          std::string::npos,
      narrow.str());
  std::ostringstream all;
  t.print(all, "  ", 0);
  BOOST_TEST(all.str().find("25088") != std::string::npos);
  BOOST_TEST(all.str().find("left out") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
