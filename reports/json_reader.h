// Typed access to a JSON document that names the file and the field path in every
// error ("run.json: phases[1].planned.peak: missing"), so a bad file is fixed at once.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "planner/json_text.h"
#include "reports/input_error.h"

namespace popkit::reports {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& json, std::string filename, std::string path = "")
      : json_(json), filename_(std::move(filename)), path_(std::move(path)) {}

  [[nodiscard]] const nlohmann::json& json() const { return json_; }
  [[nodiscard]] bool has(const std::string& key) const;
  [[nodiscard]] JsonReader object(const std::string& key) const;  // a required object
  [[nodiscard]] std::vector<JsonReader> array(const std::string& key) const;
  [[nodiscard]] const nlohmann::json& value(const std::string& key) const;  // any type

  [[nodiscard]] std::string string(const std::string& key) const;
  [[nodiscard]] double number(const std::string& key) const;
  [[nodiscard]] std::int64_t integer(const std::string& key) const;
  [[nodiscard]] std::uint64_t bytes(const std::string& key) const;  // unsigned integer
  [[nodiscard]] bool boolean(const std::string& key) const;
  [[nodiscard]] std::vector<double> numbers(const std::string& key) const;
  // Times and rates: a number >= 0 (a negative step time is a broken file, not a report).
  [[nodiscard]] double non_negative(const std::string& key) const;
  [[nodiscard]] std::vector<double> non_negatives(const std::string& key) const;
  [[nodiscard]] std::vector<std::uint64_t> bytes_list(const std::string& key) const;
  // This value itself, as an element of numbers() and non_negatives() is read.
  [[nodiscard]] double as_number() const;
  [[nodiscard]] double as_non_negative() const;

  // "FILE: PATH.KEY: MESSAGE"
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  // "PATH.KEY", the path of a field as errors and planner::JsonPath::str() write it.
  [[nodiscard]] std::string field(const std::string& key) const;

 private:
  [[nodiscard]] const nlohmann::json& require(const std::string& key) const;

  const nlohmann::json& json_;
  std::string filename_;
  std::string path_;
};

// The most a plan or run file may hold, as configs are bounded: above the plan of the
// largest config (14,000 phased layers, where the config's node limit stops: a 264 MB
// plan, reported in 4 s and 0.72 GB), far above a run file's (tens of MB at 1,000
// replicas, 50 bytes a step). A report needs 1.5 to 3 times the file in memory, and about
// 15 ms a MB of plan, 4 a MB of a run file's steps (525 MB in 2.2 s): the big arrays are
// read as they are parsed (planner/json_text.h's splits), never into a DOM
// (bench/report_size.sh, bench/README.md "Plan files written as they are produced").
inline constexpr std::uint64_t kMaxInputFileBytes = std::uint64_t{512} << 20;

// The text of a plan or run file. Throws InputError: "FILE: no such file", "FILE: is a
// directory", "FILE: is not a regular file (a FIFO)", a file over kMaxInputFileBytes.
std::string read_input_file(const std::string& filename);

// JSON text of a plan or run file as a DOM (planner::parse_json, with `splits`). Throws
// InputError "FILE:LINE:COLUMN: not JSON: ..." (and the line, with a caret).
nlohmann::json parse_input_json(std::string_view text, const std::string& filename,
                                std::initializer_list<planner::JsonSplit*> splits = {});

// read_input_file, then parse_input_json.
nlohmann::json read_json_file(const std::string& filename);

}  // namespace popkit::reports
