// The planner's text tables; see text_table.h.
#include "planner/text_table.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "planner/fold_rows.h"

namespace popkit::planner {

void Printer::aligned(std::string_view text, std::size_t width, bool right) {
  if (!std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; })) {
    if (right)
      print("{:>{}}", text, width);
    else
      print("{:<{}}", text, width);
    return;
  }
  const std::size_t pad = width > text.size() ? width - text.size() : 0;
  if (right) put(' ', pad);
  put(text);
  if (!right) put(' ', pad);
}

namespace {

// Words after `first`, a space between two on a line, a new line after `indent` when the
// next would pass `width`.
void print_words(Printer& out, std::string_view first, std::string_view indent,
                 const std::vector<std::string_view>& words, std::size_t width) {
  std::size_t used = first.size();
  out.put(first);
  bool line_empty = true;
  for (const std::string_view word : words) {
    if (!line_empty && used + 1 + word.size() > width) {
      out.put('\n');
      out.put(indent);
      used = indent.size();
      line_empty = true;
    }
    if (!line_empty) {
      out.put(' ');
      ++used;
    }
    out.put(word);
    used += word.size();
    line_empty = false;
  }
  out.put('\n');
}

}  // namespace

void print_wrapped(Printer& out, std::string_view first, std::string_view indent,
                   std::string_view text, std::size_t width) {
  std::vector<std::string_view> words;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    if (end > at) words.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  print_words(out, first, indent, words, width);
}

void print_wrapped(Printer& out, std::string_view first, std::string_view indent,
                   const std::vector<std::string>& items, std::size_t width) {
  std::vector<std::string> with_commas(items);
  for (std::size_t i = 0; i + 1 < with_commas.size(); ++i) with_commas[i] += ',';
  print_words(out, first, indent, {with_commas.begin(), with_commas.end()}, width);
}

bool TextTable::print(Printer& out, const std::string& indent, std::size_t width) const {
  FoldedRows folded;
  if (fold_ && width > 0) folded = fold_rows(rows_);
  const std::vector<std::vector<std::string>>& rows = folded.folded ? folded.rows : rows_;
  std::vector<std::size_t> widths(header_.size());
  for (std::size_t c = 0; c < header_.size(); ++c) widths[c] = header_[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size() && c < widths.size(); ++c)
      widths[c] = std::max(widths[c], r[c].size());
  const std::size_t n_keys = std::min(n_keys_, header_.size());
  std::vector<std::size_t> keys;
  std::size_t keys_width = indent.size();
  for (std::size_t c = 0; c < n_keys; ++c) {
    keys.push_back(c);
    keys_width += (c > 0 ? 3 : 0) + widths[c];
  }
  // Blocks of columns, each after the keys, each within `width` (a column wider than
  // that alone in its block); one block when width is 0 or everything fits.
  std::vector<std::size_t> block = keys;
  std::size_t used = keys_width;
  bool first = true;
  for (std::size_t c = n_keys; c < header_.size(); ++c) {
    if (width > 0 && wide_only_[c]) continue;
    const std::size_t add = (block.empty() ? 0 : 3) + widths[c];
    if (width > 0 && used + add > width && block.size() > keys.size()) {
      if (!first) out.put('\n');
      print_block(out, indent, block, widths, rows);
      first = false;
      block = keys;
      used = keys_width;
    }
    block.push_back(c);
    used += (block.size() > 1 ? 3 : 0) + widths[c];
  }
  if (!first) out.put('\n');
  print_block(out, indent, block, widths, rows);
  // Columns left out are named, with where to find them.
  std::vector<std::string> left_out;
  for (std::size_t c = n_keys; c < header_.size(); ++c)
    if (width > 0 && wide_only_[c]) left_out.push_back(header_[c]);
  if (!left_out.empty())
    print_wrapped(out, indent + "(left out to fit: ", indent + " ",
                  fmt::format("{}; --format wide shows them)", fmt::join(left_out, ", ")), width);
  return folded.folded;
}

void TextTable::print_block(Printer& out, const std::string& indent,
                            const std::vector<std::size_t>& columns,
                            const std::vector<std::size_t>& widths,
                            const std::vector<std::vector<std::string>>& rows) const {
  print_row(out, indent, header_, columns, widths);
  out.put(indent);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out.put("-+-");
    out.put('-', widths[columns[i]]);
  }
  out.put('\n');
  for (const auto& r : rows) print_row(out, indent, r, columns, widths);
}

void TextTable::print_row(Printer& out, const std::string& indent,
                          const std::vector<std::string>& r,
                          const std::vector<std::size_t>& columns,
                          const std::vector<std::size_t>& widths) const {
  out.put(indent);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::size_t c = columns[i];
    const std::string_view text = c < r.size() ? std::string_view(r[c]) : std::string_view();
    if (i > 0) out.put(" | ");
    if (!right_[c] && i + 1 == columns.size())
      out.put(text);
    else
      out.aligned(text, widths[c], right_[c]);
  }
  out.put('\n');
}

}  // namespace popkit::planner
