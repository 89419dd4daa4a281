#include "planner/json_writer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "base/error.h"

namespace popkit::planner {
namespace {

constexpr std::size_t kSpillBytes = std::size_t{1} << 20;

template <typename Int>
void append_integer(std::string& buf, Int v) {
  std::array<char, 24> digits{};
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), v);
  POPKIT_ASSERT(ec == std::errc());
  buf.append(digits.data(), end);
}

// A JSON string. Printable ASCII other than '"' and '\\' is written as it is; anything
// else goes through nlohmann's escaping (and its check of UTF-8), as a DOM's dump would.
void append_string(std::string& buf, std::string_view s) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'; });
  if (plain) {
    buf += '"';
    buf.append(s);
    buf += '"';
  } else {
    buf += nlohmann::json(std::string(s)).dump();
  }
}

}  // namespace

JsonWriter::JsonWriter(std::ostream& out, int indent) : out_(out), indent_(indent) {
  buf_.reserve(kSpillBytes + 4096);
}

JsonWriter::~JsonWriter() {
  if (!buf_.empty()) out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
}

void JsonWriter::finish() {
  POPKIT_ASSERT(depth_ == 0 && !after_key_);
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
  out_.flush();
}

void JsonWriter::spill() {
  if (buf_.size() < kSpillBytes) return;
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
}

void JsonWriter::newline_indent(std::size_t depth) {
  buf_ += '\n';
  buf_.append(depth * static_cast<std::size_t>(indent_), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (depth_ == 0) return;
  Level& level = levels_[depth_ - 1];
  POPKIT_ASSERT(!level.object);  // an object's values come after their keys
  if (!level.empty) buf_ += ',';
  level.empty = false;
  newline_indent(depth_);
}

JsonWriter& JsonWriter::key(std::string_view key) {
  POPKIT_ASSERT(depth_ > 0 && !after_key_);
  Level& level = levels_[depth_ - 1];
  POPKIT_ASSERT(level.object);
  POPKIT_ASSERT(level.empty || level.last_key < key);
  level.last_key.assign(key);
  if (!level.empty) buf_ += ',';
  level.empty = false;
  newline_indent(depth_);
  append_string(buf_, key);
  buf_ += ": ";
  after_key_ = true;
  return *this;
}

void JsonWriter::open(bool object) {
  // Levels are kept when closed, so that their last keys' strings are reused.
  if (depth_ == levels_.size()) levels_.emplace_back();
  Level& level = levels_[depth_++];
  level.object = object;
  level.empty = true;
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  buf_ += '{';
  open(true);
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  buf_ += '[';
  open(false);
  return *this;
}

JsonWriter& JsonWriter::close(bool object) {
  POPKIT_ASSERT(depth_ > 0 && levels_[depth_ - 1].object == object && !after_key_);
  --depth_;
  if (!levels_[depth_].empty) newline_indent(depth_);
  buf_ += object ? '}' : ']';
  spill();
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  return close(true);
}

JsonWriter& JsonWriter::end_array() {
  return close(false);
}

JsonWriter& JsonWriter::value(std::int64_t v) {
  before_value();
  append_integer(buf_, v);
  return *this;
}

JsonWriter& JsonWriter::value(std::uint64_t v) {
  before_value();
  append_integer(buf_, v);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  before_value();
  if (!std::isfinite(v)) {
    buf_ += "null";
    return *this;
  }
  std::array<char, 64> digits{};
  // nlohmann's own formatting (Grisu2, shortest round trip, "1.0" for integral values),
  // so that the text is the DOM's.
  char* end = nlohmann::detail::to_chars(digits.data(), digits.data() + digits.size(), v);
  buf_.append(digits.data(), end);
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  before_value();
  buf_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view v) {
  before_value();
  append_string(buf_, v);
  return *this;
}

JsonWriter& JsonWriter::value(const nlohmann::json& v) {
  before_value();
  const std::string text = v.dump(indent_);
  const std::size_t shift = depth_ * static_cast<std::size_t>(indent_);
  for (const char c : text) {
    buf_ += c;
    if (c == '\n') buf_.append(shift, ' ');
  }
  spill();
  return *this;
}

}  // namespace popkit::planner
