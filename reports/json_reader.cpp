#include "reports/json_reader.h"

#include <fmt/format.h>

#include <limits>

#include "base/input_file.h"

namespace popkit::reports {

namespace {

std::string type_phrase(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number_integer() && !j.is_number_unsigned() && j.get<std::int64_t>() < 0) {
    return "a negative integer";
  }
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
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
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (j.is_number_unsigned() && j.get<std::uint64_t>() > kMax) {
    fail(key, fmt::format("{} is out of range (at most {})", j.get<std::uint64_t>(), kMax));
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

double JsonReader::as_number() const {
  if (!json_.is_number()) fail("", fmt::format("expected a number, got {}", type_phrase(json_)));
  return json_.get<double>();
}

double JsonReader::as_non_negative() const {
  const double v = as_number();
  if (v < 0) fail("", fmt::format("{} is negative; a time or a rate is >= 0", v));
  if (v > planner::kMaxTimeOrRate)
    fail("", fmt::format("{} is past any time or rate (at most {})", v, planner::kMaxTimeOrRate));
  return v;
}

std::vector<double> JsonReader::numbers(const std::string& key) const {
  std::vector<double> out;
  for (const JsonReader& item : array(key)) out.push_back(item.as_number());
  return out;
}

double JsonReader::non_negative(const std::string& key) const {
  const double v = number(key);
  if (v < 0) fail(key, fmt::format("{} is negative; a time or a rate is >= 0", v));
  if (v > planner::kMaxTimeOrRate)
    fail(key, fmt::format("{} is past any time or rate (at most {})", v, planner::kMaxTimeOrRate));
  return v;
}

std::vector<double> JsonReader::non_negatives(const std::string& key) const {
  std::vector<double> out;
  for (const JsonReader& item : array(key)) out.push_back(item.as_non_negative());
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

std::string read_input_file(const std::string& filename) {
  try {
    InputFile file = open_input_file(filename, "give the path of a plan or run file");
    return file.read_all(kMaxInputFileBytes, "plan or run file");
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError("{}", e.what());
  }
}

nlohmann::json parse_input_json(std::string_view text, const std::string& filename,
                                std::initializer_list<planner::JsonSplit*> splits) {
  try {
    return planner::parse_json(text, filename, splits);
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError("{}", e.what());
  }
}

nlohmann::json read_json_file(const std::string& filename) {
  return parse_input_json(read_input_file(filename), filename);
}

}  // namespace popkit::reports
