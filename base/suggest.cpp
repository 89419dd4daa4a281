// Edit distance and suggestions; see suggest.h.
#include "base/suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace popkit {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  // Keys are short; a long word is not a typo of one and would cost time.
  if (word.empty() || word.size() > 64 || candidates.size() > kMaxCandidates) return "";
  // A difference of case only is the best guess there is (MIB -> MiB).
  for (const auto& candidate : candidates) {
    if (candidate.size() == word.size() &&
        std::equal(word.begin(), word.end(), candidate.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return fmt::format("; did you mean '{}'?", candidate);
    }
  }
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  const std::string* best = nullptr;
  std::size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    const std::size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best = &candidate;
      best_distance = d;
    }
  }
  if (!best) {
    for (const auto& candidate : candidates) {
      const std::string_view shorter = word.size() < candidate.size() ? word : candidate;
      const std::string_view longer = word.size() < candidate.size() ? candidate : word;
      if (shorter.size() >= 4 && longer.substr(0, shorter.size()) == shorter) {
        best = &candidate;
        break;
      }
    }
  }
  return best ? fmt::format("; did you mean '{}'?", *best) : "";
}

}  // namespace popkit
