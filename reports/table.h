// The one data model of every popreport output: a Report is a list of Tables; a
// Reporter writes a Report to an injected std::ostream as text, markdown, csv or json
// (as google/benchmark's reporters share one Run model). Cells carry the text a person
// reads and, where there is one, the raw number a machine reads: text and markdown show
// the text, csv and json the number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/names.h"

namespace popkit::reports {

// text: tables within kTextWidth columns, a wider one in blocks of columns that each
// repeat its leading text columns; wide: each table in one piece.
enum class Format { kText, kWide, kMarkdown, kCsv, kJson };

inline constexpr std::size_t kTextWidth = 100;

// "text" | "wide" | "markdown" | "csv" | "json" (base/names.h reads the table).
NameTable<Format> name_table(Format);

// A format by name; throws InputError for anything else.
Format parse_format(const std::string& name);

struct Column {
  std::string key;      // snake_case, for csv and json
  std::string title;    // for text and markdown
  bool numeric = true;  // right-aligned in text and markdown
};

struct Cell {
  std::string text;
  std::optional<double> value;  // raw number for csv and json; absent: the text is the value
};

// A byte count: "1.50 KiB" (format_bytes) with the exact number as its value.
Cell bytes_cell(std::uint64_t bytes);

// A column whose cells are equal in every row, folded out of the rows into a header
// line ("Threshold: 512"). Text and markdown print it above the table; csv and json put
// it back into every row, so machines see one flat table.
struct CommonColumn {
  Column column;
  Cell cell;
  std::size_t position = 0;  // the column's index before folding
};

struct Table {
  std::string key;    // "memory", "throughput", ...; json and csv name the table with it
  std::string title;  // printed above the table in text and markdown
  std::vector<std::string> notes;  // lines under the title
  std::vector<CommonColumn> common;
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // each row has columns.size() cells
};

struct Report {
  std::vector<Table> tables;
};

// Moves every column (except those listed in `keep`) whose cells print the same in all
// rows into table.common. Tables with fewer than two rows keep their columns.
void fold_equal_columns(Table& table, const std::vector<std::string>& keep);

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void write(const Report& report, std::ostream& out) const = 0;
};

std::unique_ptr<Reporter> make_reporter(Format format);

inline void write_report(const Report& report, Format format, std::ostream& out) {
  make_reporter(format)->write(report, out);
}

}  // namespace popkit::reports
