// Typed access to a JSON document that names the file and the field path in every
// error ("run.json: phases[1].planned.peak: missing"), so a bad file is fixed at once.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
  [[nodiscard]] std::vector<std::uint64_t> bytes_list(const std::string& key) const;

  // "FILE: PATH.KEY: MESSAGE"
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  [[nodiscard]] std::string field(const std::string& key) const;
  [[nodiscard]] const nlohmann::json& require(const std::string& key) const;

  const nlohmann::json& json_;
  std::string filename_;
  std::string path_;
};

// The file's text parsed as JSON; throws InputError "FILE: cannot open" or
// "FILE: not JSON: parse error at line L, column C: ...".
nlohmann::json read_json_file(const std::string& filename);

}  // namespace popkit::reports
