// Rows of a text table that repeat with counting numbers, folded into one row each: a
// GPT's 48 blocks list the same 36 variables 48 times, "h0.ln1.scale" to
// "h47.ln1.scale", and a reader wants them once, as "h{0..47}.ln1.scale" (the brace
// range of a shell, which expands back into the rows).
//
// A run folds when at least `min_repeats` consecutive groups of the same `period` rows
// say the same words and the same numbers, but for whole numbers that count up or down
// by one from one group to the next ("{47..0}" counts down). A number is a run of digits that is
// not part of a decimal or a number with thousands separators ("1.25 GiB", "1,600"): those must be
// equal. At least one number must count: identical rows are not folded.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace popkit::planner {

using TextRow = std::vector<std::string>;

struct FoldedRows {
  std::vector<TextRow> rows;
  bool folded = false;  // a run was folded
};

// Scans left to right; at each row the shortest period that repeats at least
// `min_repeats` times wins, and the fold takes every repeat that follows.
FoldedRows fold_rows(const std::vector<TextRow>& rows, std::size_t min_repeats = 3,
                     std::size_t max_period = 128);

}  // namespace popkit::planner
