// Text output of the planner's printouts (plans, groupings): a Printer that buffers a
// stream's text in blocks, and a TextTable whose columns are separated by " | " with a
// rule under the header. A table wider than its width limit (100 columns unless told
// otherwise) is printed in blocks of columns, each repeating the table's key columns, so
// a terminal shows all of it without wrapping lines; a width of 0 prints one block.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace popkit::planner {

// The width text output fits unless asked for all of it (--format wide).
inline constexpr std::size_t kTextWidth = 100;

// Text for a stream, formatted into a buffer that goes out in blocks of about 64 KiB:
// a plan of 10,000 layers prints a million lines, and a stream insertion or a string
// per piece of a line cost more than the formatting.
class Printer {
 public:
  explicit Printer(std::ostream& out) : out_(out) {}
  Printer(const Printer&) = delete;
  Printer& operator=(const Printer&) = delete;
  ~Printer() { flush(); }

  template <typename... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(buf_), format, std::forward<Args>(args)...);
    if (buf_.size() >= kBlock) flush();
  }
  void put(std::string_view text) {
    buf_.append(text);
    if (buf_.size() >= kBlock) flush();
  }
  void put(char c, std::size_t n = 1) {
    for (std::size_t i = 0; i < n; ++i) buf_.push_back(c);
  }
  // fmt's {:<width} (or {:>width} when `right`). fmt measures the width in code points;
  // for ASCII, the names and numbers of a plan, that is the size, and padding by hand
  // spares its per-character scan.
  void aligned(std::string_view text, std::size_t width, bool right);
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  static constexpr std::size_t kBlock = std::size_t{64} << 10;
  std::ostream& out_;
  fmt::memory_buffer buf_;
};

// `text` broken at spaces into lines of at most `width` columns (a longer word alone):
// the first line after `first`, the others after `indent`; each ends with a newline.
void print_wrapped(Printer& out, std::string_view first, std::string_view indent,
                   std::string_view text, std::size_t width = kTextWidth);
// The same for a list: `items` joined by ", ", broken only between items.
void print_wrapped(Printer& out, std::string_view first, std::string_view indent,
                   const std::vector<std::string>& items, std::size_t width = kTextWidth);

// A table with columns separated by " | ", a rule under the header; numeric columns
// right-aligned. The first `n_keys` columns name a row and start every block. Columns
// marked `wide_only` (what the others already say another way) are printed only without
// a width limit. A table told to `fold_repeats()` prints rows that repeat with counting
// numbers as one row (fold_rows.h), but without a width limit, where it prints them all.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> right, std::size_t n_keys = 1,
            std::vector<bool> wide_only = {})
      : header_(std::move(header)),
        right_(std::move(right)),
        n_keys_(n_keys),
        wide_only_(std::move(wide_only)) {
    right_.resize(header_.size(), false);
    wide_only_.resize(header_.size(), false);
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void fold_repeats() { fold_ = true; }

  // Each returns whether it folded rows.
  bool print(std::ostream& out, const std::string& indent = "  ",
             std::size_t width = kTextWidth) const {
    Printer p(out);
    return print(p, indent, width);
  }
  bool print(Printer& out, const std::string& indent = "  ", std::size_t width = kTextWidth) const;

 private:
  void print_block(Printer& out, const std::string& indent, const std::vector<std::size_t>& columns,
                   const std::vector<std::size_t>& widths,
                   const std::vector<std::vector<std::string>>& rows) const;
  void print_row(Printer& out, const std::string& indent, const std::vector<std::string>& r,
                 const std::vector<std::size_t>& columns,
                 const std::vector<std::size_t>& widths) const;

  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::size_t n_keys_;
  std::vector<bool> wide_only_;
  bool fold_ = false;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace popkit::planner
