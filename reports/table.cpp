#include "reports/table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>

#include "base/units.h"
#include "reports/input_error.h"

namespace popkit::reports {

namespace {

// Display width of UTF-8 text: one column per code point (tables use "Δ", "×").
std::size_t display_width(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  const std::size_t w = display_width(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + s : s + fill;
}

// The table with its folded columns put back where they were: what csv and json show.
struct Flat {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
};

Flat unfold(const Table& t) {
  Flat f{t.columns, t.rows};
  std::vector<CommonColumn> common = t.common;
  std::sort(common.begin(), common.end(),
            [](const CommonColumn& a, const CommonColumn& b) { return a.position < b.position; });
  for (const CommonColumn& c : common) {
    const std::size_t at = std::min(c.position, f.columns.size());
    f.columns.insert(f.columns.begin() + static_cast<std::ptrdiff_t>(at), c.column);
    for (auto& row : f.rows) row.insert(row.begin() + static_cast<std::ptrdiff_t>(at), c.cell);
  }
  return f;
}

std::string number_text(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) {
    return fmt::format("{}", static_cast<std::int64_t>(v));
  }
  return fmt::format("{}", v);
}

// Text within `width` columns (0: no limit): a wider table is printed in blocks of
// columns, each repeating the table's leading text columns (what names a row).
class TextReporter : public Reporter {
 public:
  explicit TextReporter(std::size_t width) : width_(width) {}

  void write(const Report& report, std::ostream& out) const override {
    bool first = true;
    for (const Table& t : report.tables) {
      if (!first) out << '\n';
      first = false;
      if (!t.title.empty()) write_wrapped(t.title, "  ", out);
      for (const std::string& note : t.notes) write_wrapped("  " + note, "    ", out);
      for (const CommonColumn& c : t.common) {
        out << "  " << c.column.title << ": " << c.cell.text << '\n';
      }
      if (!t.title.empty() || !t.notes.empty() || !t.common.empty()) out << '\n';
      std::vector<std::size_t> widths;
      for (const Column& c : t.columns) widths.push_back(display_width(c.title));
      for (const auto& row : t.rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
          widths[i] = std::max(widths[i], display_width(row[i].text));
        }
      }
      std::vector<std::size_t> keys;
      while (keys.size() < t.columns.size() && !t.columns[keys.size()].numeric)
        keys.push_back(keys.size());
      if (keys.empty() && !t.columns.empty()) keys.push_back(0);
      std::size_t keys_width = 0;
      for (const std::size_t k : keys) keys_width += (k > 0 ? 2 : 0) + widths[k];
      std::vector<std::size_t> block = keys;
      std::size_t used = keys_width;
      bool first_block = true;
      for (std::size_t c = keys.size(); c < t.columns.size();) {
        // A figure and the ratio or difference beside it stay in one block.
        std::size_t end = c + 1;
        std::size_t unit = 2 + widths[c];
        while (end < t.columns.size() && follows(t.columns[end].key)) unit += 2 + widths[end++];
        if (width_ > 0 && used + unit > width_ && block.size() > keys.size()) {
          write_block(t, block, widths, !first_block, out);
          first_block = false;
          block = keys;
          used = keys_width;
        }
        for (; c < end; ++c) block.push_back(c);
        used += unit;
      }
      write_block(t, block, widths, !first_block, out);
    }
  }

 private:
  // A column that belongs to the one before it: "peak_memory_ratio", "peak_vs_plan".
  static bool follows(const std::string& key) {
    return key.ends_with("_ratio") || key.ends_with("_vs_plan");
  }

  // `text` broken at spaces into lines within the width, the later ones after `indent`.
  void write_wrapped(const std::string& text, const std::string& indent, std::ostream& out) const {
    const std::size_t lead = text.find_first_not_of(' ');
    const std::string note = lead == std::string::npos ? "" : text.substr(lead);
    std::string line = text.substr(0, lead == std::string::npos ? 0 : lead);
    bool empty = true;
    for (std::size_t at = 0; at <= note.size();) {
      std::size_t end = note.find(' ', at);
      if (end == std::string::npos) end = note.size();
      const std::string word = note.substr(at, end - at);
      at = end + 1;
      if (word.empty()) continue;
      if (!empty && width_ > 0 && display_width(line) + 1 + display_width(word) > width_) {
        out << line << '\n';
        line = indent;
        empty = true;
      }
      line += (empty ? "" : " ") + word;
      empty = false;
    }
    out << line << '\n';
  }

  static void write_block(const Table& t, const std::vector<std::size_t>& block,
                          const std::vector<std::size_t>& widths, bool after_another,
                          std::ostream& out) {
    if (after_another) out << '\n';
    auto line = [&](auto cell_text, auto right) {
      std::string s;
      for (std::size_t j = 0; j < block.size(); ++j) {
        if (j > 0) s += "  ";
        s += pad(cell_text(block[j]), widths[block[j]], right(block[j]));
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      out << s << '\n';
    };
    line([&](std::size_t i) { return t.columns[i].title; },
         [&](std::size_t i) { return t.columns[i].numeric; });
    line([&](std::size_t i) { return std::string(widths[i], '-'); },
         [](std::size_t) { return false; });
    for (const auto& row : t.rows) {
      line([&](std::size_t i) { return row[i].text; },
           [&](std::size_t i) { return t.columns[i].numeric; });
    }
  }

  std::size_t width_;
};

std::string markdown_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

class MarkdownReporter : public Reporter {
 public:
  void write(const Report& report, std::ostream& out) const override {
    bool first = true;
    for (const Table& t : report.tables) {
      if (!first) out << '\n';
      first = false;
      if (!t.title.empty()) out << "### " << markdown_escape(t.title) << "\n\n";
      for (const std::string& note : t.notes) out << markdown_escape(note) << "\n\n";
      for (const CommonColumn& c : t.common) {
        out << "- " << markdown_escape(c.column.title) << ": " << markdown_escape(c.cell.text)
            << '\n';
      }
      if (!t.common.empty()) out << '\n';
      out << '|';
      for (const Column& c : t.columns) out << ' ' << markdown_escape(c.title) << " |";
      out << "\n|";
      for (const Column& c : t.columns) out << (c.numeric ? "---:|" : ":---|");
      out << '\n';
      for (const auto& row : t.rows) {
        out << '|';
        for (const Cell& cell : row) out << ' ' << markdown_escape(cell.text) << " |";
        out << '\n';
      }
    }
  }
};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

class CsvReporter : public Reporter {
 public:
  void write(const Report& report, std::ostream& out) const override {
    bool first = true;
    for (const Table& t : report.tables) {
      if (!first) out << '\n';
      first = false;
      const Flat f = unfold(t);
      for (std::size_t i = 0; i < f.columns.size(); ++i) {
        out << (i ? "," : "") << csv_field(f.columns[i].key);
      }
      out << '\n';
      for (const auto& row : f.rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
          out << (i ? "," : "")
              << csv_field(row[i].value ? number_text(*row[i].value) : row[i].text);
        }
        out << '\n';
      }
    }
  }
};

nlohmann::ordered_json json_value(const Cell& cell) {
  if (cell.value) {
    const double v = *cell.value;
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) {
      return static_cast<std::int64_t>(v);
    }
    return v;
  }
  if (cell.text.empty()) return nullptr;
  return cell.text;
}

class JsonReporter : public Reporter {
 public:
  void write(const Report& report, std::ostream& out) const override {
    nlohmann::ordered_json tables = nlohmann::ordered_json::array();
    for (const Table& t : report.tables) {
      const Flat f = unfold(t);
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (const auto& row : f.rows) {
        nlohmann::ordered_json r = nlohmann::ordered_json::object();
        for (std::size_t i = 0; i < row.size(); ++i) r[f.columns[i].key] = json_value(row[i]);
        rows.push_back(std::move(r));
      }
      nlohmann::ordered_json table;
      table["key"] = t.key;
      table["title"] = t.title;
      table["notes"] = t.notes;
      table["rows"] = std::move(rows);
      tables.push_back(std::move(table));
    }
    nlohmann::ordered_json doc;
    doc["tables"] = std::move(tables);
    // Names come from file names and --names, which need not be UTF-8: such bytes are
    // written as U+FFFD rather than failing the report.
    out << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  }
};

}  // namespace

Cell bytes_cell(std::uint64_t bytes) {
  return Cell{format_bytes(bytes), static_cast<double>(bytes)};
}

NameTable<Format> name_table(Format) {
  static constexpr NameArray<Format, 5> kFormats{{{Format::kText, "text"},
                                                  {Format::kWide, "wide"},
                                                  {Format::kMarkdown, "markdown"},
                                                  {Format::kCsv, "csv"},
                                                  {Format::kJson, "json"}}};
  return kFormats;
}

Format parse_format(const std::string& name) {
  if (const auto format = parse_enum<Format>(name)) return *format;
  throw InputError("--format: \"{}\" is not a format ({})", name,
                   fmt::join(enum_names<Format>(), ", "));
}

void fold_equal_columns(Table& table, const std::vector<std::string>& keep) {
  if (table.rows.size() < 2) return;
  std::vector<Column> columns;
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    const bool equal = std::all_of(table.rows.begin(), table.rows.end(), [&](const auto& row) {
      return row[i].text == table.rows.front()[i].text;
    });
    const bool keep_it = std::find(keep.begin(), keep.end(), table.columns[i].key) != keep.end();
    if (equal && !keep_it) {
      table.common.push_back(CommonColumn{table.columns[i], table.rows.front()[i], i});
    } else {
      kept.push_back(i);
      columns.push_back(table.columns[i]);
    }
  }
  for (auto& row : table.rows) {
    std::vector<Cell> cells;
    for (std::size_t i : kept) cells.push_back(std::move(row[i]));
    row = std::move(cells);
  }
  table.columns = std::move(columns);
}

std::unique_ptr<Reporter> make_reporter(Format format) {
  switch (format) {
    case Format::kText:
      return std::make_unique<TextReporter>(kTextWidth);
    case Format::kWide:
      return std::make_unique<TextReporter>(0);
    case Format::kMarkdown:
      return std::make_unique<MarkdownReporter>();
    case Format::kCsv:
      return std::make_unique<CsvReporter>();
    case Format::kJson:
      return std::make_unique<JsonReporter>();
  }
  return std::make_unique<TextReporter>(kTextWidth);
}

}  // namespace popkit::reports
