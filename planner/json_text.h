// JSON text as the file readers (plan files here, run files in reports/) parse it. Errors
// name the place: "FILE:LINE:COLUMN: message", then the line and a caret; a number beyond
// a double's range and nesting deeper than kMaxJsonDepth are errors too, where nlohmann's
// own parser throws without a position or runs out of stack later.
//
// The DOM need not hold the whole file (nlohmann's DOM costs about ten times the text): a
// JsonSplit claims arrays by their path, gets each element as soon as it is parsed, keeps
// what it needs (a reader converts the element to its struct at once), and the DOM holds
// a placeholder where the array was (a claimed array's plain numbers are read without
// nlohmann's lexer, with the same values and errors). The reader then
// takes the converted array from the split where it would have read the array:
//
//   PlanSplit split("plan.json");                      // claims "phases[].ops", ...
//   const nlohmann::json dom = parse_json(text, "plan.json", {&split});
//   Plan plan = plan_from_json(dom, "plan.json", &split);
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace popkit::planner {

// The largest time (seconds) or rate (per second) a plan or run file may hold: far past
// any real one, and small enough that the reports' sums over ten million steps stay
// finite (1e308 twice was "total step time inf s").
inline constexpr double kMaxTimeOrRate = 1e30;

// Deeper nesting is refused: no file popkit writes comes near, and copying, comparing or
// printing a DOM recurses once per level.
inline constexpr std::size_t kMaxJsonDepth = 256;

// Where a value sits in a document: keys and array indices from the root.
class JsonPath {
 public:
  // "phases[3].ops", the form the readers' errors use.
  [[nodiscard]] std::string str() const;
  // Keys, and "[]" for any array index: path.matches({"phases", "[]", "ops"}).
  [[nodiscard]] bool matches(std::initializer_list<std::string_view> pattern) const;

  void push_key() { steps_.push_back({}); }
  void push_index() { steps_.push_back({{}, 0, true}); }
  void pop() { steps_.pop_back(); }
  void set_key(const std::string& key) { steps_.back().key = key; }
  void set_index(std::size_t index) { steps_.back().index = index; }

 private:
  struct Step {
    std::string key;
    std::size_t index = 0;
    bool is_index = false;
  };
  std::vector<Step> steps_;
};

// Claims arrays to read element by element (see the top of this file).
class JsonSplit {
 public:
  virtual ~JsonSplit() = default;
  // Called when an array starts: its number (the placeholder carries it) when this split
  // reads it element by element, else nothing. Arrays inside a claimed array's elements
  // are not offered.
  virtual std::optional<std::uint64_t> begin_array(const JsonPath& path) = 0;
  // One complete element of claimed array `array`.
  virtual void element(std::uint64_t array, std::size_t index, nlohmann::json&& value) = 0;
};

// The text as a DOM; claimed arrays are placeholders (the first split to claim an array
// gets it). Throws popkit::Error "FILE:LINE:COLUMN: ...".
nlohmann::json parse_json(std::string_view text, const std::string& filename,
                          std::initializer_list<JsonSplit*> splits = {});

// A placeholder is a binary value, which JSON text never produces.
[[nodiscard]] inline bool is_placeholder(const nlohmann::json& j) {
  return j.is_binary();
}

// The arrays of one element type that a split read, each element converted at once by
// the reader's own function, so that the reader's errors come out the same, at the same
// point of its reading: the first bad element's error is kept and thrown by take (the
// reader never gets past it, so later elements are not converted).
//
// A split with several element types keeps one SplitArrays per type; array numbers
// tell them apart: type `tag` of `n_types` numbers its arrays tag, tag + n_types, ...
template <typename T>
class SplitArrays {
 public:
  explicit SplitArrays(unsigned tag = 0, unsigned n_types = 1) : tag_(tag), n_types_(n_types) {}

  [[nodiscard]] bool owns(std::uint64_t array) const { return array % n_types_ == tag_; }

  std::uint64_t begin(const JsonPath& path) {
    arrays_.push_back(Array{path.str(), {}, nullptr, false});
    return (arrays_.size() - 1) * n_types_ + tag_;
  }

  // convert(const nlohmann::json&, const std::string& path) -> T, throws popkit::Error.
  template <typename Convert>
  void add(std::uint64_t array, std::size_t index, const nlohmann::json& value, Convert&& convert) {
    Array& a = at(array);
    if (a.error) return;
    try {
      a.items.push_back(convert(value, a.path + "[" + std::to_string(index) + "]"));
    } catch (const Error&) {
      a.error = std::current_exception();
    }
  }

  // An element the split converted itself (a fast path for plain values: no path is
  // built); dropped, as add's are, after the array's first bad element.
  void push(std::uint64_t array, T item) {
    Array& a = at(array);
    if (!a.error) a.items.push_back(std::move(item));
  }

  // The array whose placeholder is `placeholder`, read at `path`: the path it was parsed
  // at, since the split and the reader agree on where the arrays are.
  std::vector<T> take(const nlohmann::json& placeholder, const std::string& path) {
    Array& a = at(placeholder.get_binary().subtype());
    POPKIT_ASSERT(a.path == path && !a.taken);
    a.taken = true;
    if (a.error) std::rethrow_exception(a.error);
    return std::move(a.items);
  }

 private:
  struct Array {
    std::string path;
    std::vector<T> items;
    std::exception_ptr error;
    bool taken = false;
  };

  Array& at(std::uint64_t array) {
    POPKIT_ASSERT(owns(array) && array / n_types_ < arrays_.size());
    return arrays_[static_cast<std::size_t>(array / n_types_)];
  }

  unsigned tag_;
  unsigned n_types_;
  std::deque<Array> arrays_;
};

}  // namespace popkit::planner
