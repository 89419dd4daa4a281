// Folding rows that repeat with counting numbers; see fold_rows.h.
#include "planner/fold_rows.h"

#include <cstdint>
#include <functional>

namespace popkit::planner {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Where one counting candidate sits: its cell and its digits there.
struct Number {
  std::size_t cell;
  std::size_t at;
  std::size_t size;
};

// A row as its words (each number replaced by a mark) and its numbers.
struct Parsed {
  std::string skeleton;
  std::size_t hash = 0;
  std::vector<std::int64_t> values;
  std::vector<Number> numbers;
};

// Digits that belong to a decimal or a grouped number ("1.25", "1,600") stay words.
bool part_of_larger_number(const std::string& s, std::size_t at, std::size_t end) {
  const bool after_point = at >= 2 && (s[at - 1] == '.' || s[at - 1] == ',') && is_digit(s[at - 2]);
  const bool before_point =
      end + 1 < s.size() && (s[end] == '.' || s[end] == ',') && is_digit(s[end + 1]);
  return after_point || before_point;
}

Parsed parse(const TextRow& row) {
  constexpr std::size_t kMaxDigits = 18;  // fits an int64_t
  Parsed p;
  for (std::size_t c = 0; c < row.size(); ++c) {
    const std::string& s = row[c];
    p.skeleton += '\x1f';
    for (std::size_t i = 0; i < s.size();) {
      if (!is_digit(s[i])) {
        p.skeleton += s[i++];
        continue;
      }
      std::size_t end = i;
      while (end < s.size() && is_digit(s[end])) ++end;
      if (end - i > kMaxDigits || part_of_larger_number(s, i, end)) {
        p.skeleton.append(s, i, end - i);
      } else {
        std::int64_t v = 0;
        for (std::size_t k = i; k < end; ++k) v = v * 10 + (s[k] - '0');
        p.values.push_back(v);
        p.numbers.push_back({c, i, end - i});
        p.skeleton += '\x01';
      }
      i = end;
    }
  }
  p.hash = std::hash<std::string>{}(p.skeleton);
  return p;
}

bool same_words(const Parsed& a, const Parsed& b) {
  return a.hash == b.hash && a.skeleton == b.skeleton;
}

// Row `b`'s numbers less row `a`'s, each -1, 0 or 1, into `step`; false when the words
// differ or a number does not count by one.
bool counts_from(const Parsed& a, const Parsed& b, std::vector<std::int64_t>& step) {
  if (!same_words(a, b)) return false;
  step.resize(a.values.size());
  for (std::size_t k = 0; k < a.values.size(); ++k) {
    step[k] = b.values[k] - a.values[k];
    if (step[k] < -1 || step[k] > 1) return false;
  }
  return true;
}

// Row `b` is row `a` with each number `times` steps on.
bool repeats(const Parsed& a, const Parsed& b, const std::vector<std::int64_t>& step,
             std::int64_t times) {
  if (!same_words(a, b)) return false;
  for (std::size_t k = 0; k < a.values.size(); ++k)
    if (b.values[k] != a.values[k] + step[k] * times) return false;
  return true;
}

// Row `first` with each counting number written as {first..last}.
TextRow folded_row(const TextRow& first, const TextRow& last, const Parsed& parsed,
                   const Parsed& last_parsed, const std::vector<std::int64_t>& step) {
  TextRow out(first.size());
  std::size_t k = 0;
  for (std::size_t c = 0; c < first.size(); ++c) {
    const std::string& s = first[c];
    std::size_t copied = 0;
    for (; k < parsed.numbers.size() && parsed.numbers[k].cell == c; ++k) {
      const Number& n = parsed.numbers[k];
      if (step[k] == 0) continue;
      const Number& m = last_parsed.numbers[k];
      out[c].append(s, copied, n.at - copied);
      out[c] += '{';
      out[c].append(s, n.at, n.size);
      out[c] += "..";
      out[c].append(last[c], m.at, m.size);
      out[c] += '}';
      copied = n.at + n.size;
    }
    out[c].append(s, copied, std::string::npos);
  }
  return out;
}

}  // namespace

FoldedRows fold_rows(const std::vector<TextRow>& rows, std::size_t min_repeats,
                     std::size_t max_period) {
  FoldedRows result;
  const std::size_t n = rows.size();
  if (min_repeats < 2) min_repeats = 2;
  std::vector<Parsed> parsed;
  parsed.reserve(n);
  for (const TextRow& r : rows) parsed.push_back(parse(r));

  std::vector<std::vector<std::int64_t>> steps;
  std::size_t i = 0;
  while (i < n) {
    std::size_t taken = 0;
    for (std::size_t p = 1; p <= max_period && i + min_repeats * p <= n && taken == 0; ++p) {
      if (parsed[i].hash != parsed[i + p].hash) continue;
      steps.assign(p, {});
      bool ok = true;
      bool counting = false;
      for (std::size_t k = 0; k < p && ok; ++k) {
        ok = counts_from(parsed[i + k], parsed[i + p + k], steps[k]);
        for (const std::int64_t s : steps[k]) counting = counting || s != 0;
      }
      if (!ok || !counting) continue;
      std::size_t groups = 2;
      for (; i + (groups + 1) * p <= n; ++groups) {
        bool same = true;
        for (std::size_t k = 0; k < p && same; ++k)
          same = repeats(parsed[i + k], parsed[i + groups * p + k], steps[k],
                         static_cast<std::int64_t>(groups));
        if (!same) break;
      }
      if (groups < min_repeats) continue;
      const std::size_t last = i + (groups - 1) * p;
      for (std::size_t k = 0; k < p; ++k)
        result.rows.push_back(
            folded_row(rows[i + k], rows[last + k], parsed[i + k], parsed[last + k], steps[k]));
      taken = groups * p;
      result.folded = true;
    }
    if (taken == 0) {
      result.rows.push_back(rows[i]);
      taken = 1;
    }
    i += taken;
  }
  return result;
}

}  // namespace popkit::planner
