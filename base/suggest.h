// "Did you mean …?" for unknown keys and values: the closest known name by edit
// distance, as ninja does for unknown targets.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace popkit {

// Beyond this many candidates no suggestion is made: the search would cost more than
// the hint is worth on a hostile input.
inline constexpr std::size_t kMaxCandidates = 256;

// Levenshtein distance (insert, delete, replace all cost 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// "; did you mean 'x'?" for the closest candidate, or "" when none is close: at most
// max(2, |word| / 3) edits away, or one is a prefix of the other (4 characters or more).
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace popkit
