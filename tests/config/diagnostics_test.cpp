// The printed shape of diagnostics: text with the source line and a caret, and JSON.
#include "config/diagnostics.h"

#include <boost/test/unit_test.hpp>
#include <sstream>

using namespace popkit::config;

namespace {
std::string print(const std::vector<Diagnostic>& diagnostics, const SourceMap& sources,
                  DiagnosticFormat format = DiagnosticFormat::kText) {
  std::ostringstream out;
  print_diagnostics(out, diagnostics, sources, format);
  return out.str();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(diagnostics)

BOOST_AUTO_TEST_CASE(text_shows_line_and_caret) {
  const SourceMap sources{{"a.yaml", "version: 1\nfactor: x\n"}};
  BOOST_TEST(print({{Severity::kError, "a.yaml", 2, 9, "bad"},
                    {Severity::kWarning, "a.yaml", 1, 1, "hm"},
                    {Severity::kNote, "a.yaml", 1, 10, "see"}},
                   sources) ==
             "a.yaml:2:9: error: bad\nfactor: x\n        ^\n"
             "a.yaml:1:1: warning: hm\nversion: 1\n^\n"
             "a.yaml:1:10: note: see\nversion: 1\n         ^\n");
}

BOOST_AUTO_TEST_CASE(caret_keeps_tabs_and_counts_utf8_as_one_column) {
  const SourceMap sources{{"a.yaml", "\tx: 1\nname: \xC3\xA9t\xC3\xA9 x\n"}};
  BOOST_TEST(print({{Severity::kError, "a.yaml", 1, 2, "t"}}, sources) ==
             "a.yaml:1:2: error: t\n\tx: 1\n\t^\n");
  // Columns count bytes (as yaml-cpp marks do): the x is byte 13 and display column 11.
  BOOST_TEST(print({{Severity::kError, "a.yaml", 2, 13, "u"}}, sources) ==
             "a.yaml:2:13: error: u\nname: \xC3\xA9t\xC3\xA9 x\n          ^\n");
}

BOOST_AUTO_TEST_CASE(no_position_no_source_line) {
  BOOST_TEST(print({{Severity::kError, "gone.yaml", 0, 0, "no such file"}}, {}) ==
             "gone.yaml: error: no such file\n");
  BOOST_TEST(print({{Severity::kError, "", 0, 0, "in code"}}, {}) == "error: in code\n");
}

BOOST_AUTO_TEST_CASE(json_is_escaped_and_counted) {
  BOOST_TEST(print({{Severity::kError, "a\"b.yaml", 3, 4, "x\ty"},
                    {Severity::kWarning, "a\"b.yaml", 5, 1, "w"}},
                   {}, DiagnosticFormat::kJson) ==
             "{\"diagnostics\": [{\"severity\": \"error\", \"file\": \"a\\\"b.yaml\", \"line\": "
             "3, \"column\": 4, \"message\": \"x\\ty\"}, {\"severity\": \"warning\", \"file\": "
             "\"a\\\"b.yaml\", \"line\": 5, \"column\": 1, \"message\": \"w\"}], \"errors\": 1, "
             "\"warnings\": 1}");
}

BOOST_AUTO_TEST_CASE(has_errors_ignores_warnings_and_notes) {
  BOOST_TEST(!has_errors({{Severity::kWarning, "", 0, 0, ""}, {Severity::kNote, "", 0, 0, ""}}));
  BOOST_TEST(has_errors({{Severity::kNote, "", 0, 0, ""}, {Severity::kError, "", 0, 0, ""}}));
}

BOOST_AUTO_TEST_SUITE_END()
