#include "reports/json_reader.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace popkit::reports {

namespace {

std::string type_phrase(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number_integer() && j.get<std::int64_t>() < 0) return "a negative integer";
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the id says
// nothing to a user.
std::string without_exception_id(const std::string& what) {
  if (!what.empty() && what.front() == '[') {
    const std::size_t close = what.find("] ");
    if (close != std::string::npos) return what.substr(close + 2);
  }
  return what;
}

}  // namespace

std::string JsonReader::field(const std::string& key) const {
  if (path_.empty()) return key;
  if (key.empty()) return path_;
  return key.front() == '[' ? path_ + key : path_ + "." + key;
}

void JsonReader::fail(const std::string& key, const std::string& message) const {
  throw InputError("{}: {}: {}", filename_, field(key), message);
}

bool JsonReader::has(const std::string& key) const {
  return json_.is_object() && json_.contains(key) && !json_.at(key).is_null();
}

const nlohmann::json& JsonReader::require(const std::string& key) const {
  if (!json_.is_object()) fail("", fmt::format("expected an object, got {}", type_phrase(json_)));
  const auto it = json_.find(key);
  if (it == json_.end()) fail(key, "missing");
  return *it;
}

const nlohmann::json& JsonReader::value(const std::string& key) const {
  return require(key);
}

JsonReader JsonReader::object(const std::string& key) const {
  const nlohmann::json& j = require(key);
  if (!j.is_object()) fail(key, fmt::format("expected an object, got {}", type_phrase(j)));
  return JsonReader(j, filename_, field(key));
}

std::vector<JsonReader> JsonReader::array(const std::string& key) const {
  const nlohmann::json& j = require(key);
  if (!j.is_array()) fail(key, fmt::format("expected an array, got {}", type_phrase(j)));
  std::vector<JsonReader> items;
  items.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    items.emplace_back(j[i], filename_, fmt::format("{}[{}]", field(key), i));
  }
  return items;
}

std::string JsonReader::string(const std::string& key) const {
  const nlohmann::json& j = require(key);
  if (!j.is_string()) fail(key, fmt::format("expected a string, got {}", type_phrase(j)));
  return j.get<std::string>();
}

double JsonReader::number(const std::string& key) const {
  const nlohmann::json& j = require(key);
  if (!j.is_number()) fail(key, fmt::format("expected a number, got {}", type_phrase(j)));
  return j.get<double>();
}

std::int64_t JsonReader::integer(const std::string& key) const {
  const nlohmann::json& j = require(key);
  if (!j.is_number_integer()) {
    fail(key, fmt::format("expected an integer, got {}", type_phrase(j)));
  }
  return j.get<std::int64_t>();
}

std::uint64_t JsonReader::bytes(const std::string& key) const {
  const nlohmann::json& j = require(key);
  if (!j.is_number_unsigned()) {
    fail(key, fmt::format("expected a byte count (an integer >= 0), got {}", type_phrase(j)));
  }
  return j.get<std::uint64_t>();
}

bool JsonReader::boolean(const std::string& key) const {
  const nlohmann::json& j = require(key);
  if (!j.is_boolean()) fail(key, fmt::format("expected a boolean, got {}", type_phrase(j)));
  return j.get<bool>();
}

std::vector<double> JsonReader::numbers(const std::string& key) const {
  std::vector<double> out;
  for (std::size_t i = 0; const JsonReader& item : array(key)) {
    if (!item.json().is_number()) {
      fail(fmt::format("{}[{}]", key, i),
           fmt::format("expected a number, got {}", type_phrase(item.json())));
    }
    out.push_back(item.json().get<double>());
    ++i;
  }
  return out;
}

std::vector<std::uint64_t> JsonReader::bytes_list(const std::string& key) const {
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; const JsonReader& item : array(key)) {
    if (!item.json().is_number_unsigned()) {
      fail(
          fmt::format("{}[{}]", key, i),
          fmt::format("expected a byte count (an integer >= 0), got {}", type_phrase(item.json())));
    }
    out.push_back(item.json().get<std::uint64_t>());
    ++i;
  }
  return out;
}

nlohmann::json read_json_file(const std::string& filename) {
  std::ifstream in(filename, std::ios::binary);
  if (!in) throw InputError("{}: cannot open for reading", filename);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError("{}: not JSON: {}", filename, without_exception_id(e.what()));
  }
}

}  // namespace popkit::reports
