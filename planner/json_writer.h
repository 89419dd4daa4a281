// JSON text written as it is produced, for files too big to build as a DOM first (a plan
// of the largest config is hundreds of MB: nlohmann's DOM of it costs seconds and GBs).
// The text is exactly what nlohmann's dump(indent) writes for the same document: keys
// must come in the order a DOM keeps them (sorted), which the writer checks, so that a
// file reads and compares the same whichever way it was written.
//
//   JsonWriter w(out);
//   w.begin_object();
//   w.key("layers").begin_array();
//   for (...) w.begin_object().key("name").value(name).end_object();
//   w.end_array();
//   w.end_object();
//   w.finish();      // then check `out`
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace popkit::planner {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out, int indent = 1);
  ~JsonWriter();  // hands over what is buffered
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  // A member's key: in an object, after the previous key in std::string's order.
  JsonWriter& key(std::string_view key);

  JsonWriter& value(std::int64_t v);
  JsonWriter& value(std::uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<std::int64_t>(v)); }
  JsonWriter& value(double v);  // as nlohmann writes it: shortest round trip, NaN/inf null
  JsonWriter& value(bool v);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(const std::string& v) { return value(std::string_view(v)); }
  // A small document built as a DOM (written the same way, nested at this depth).
  JsonWriter& value(const nlohmann::json& v);

  template <typename T>
  JsonWriter& values(const std::vector<T>& items) {
    begin_array();
    for (const T& item : items) value(item);
    return end_array();
  }

  // Hands the text to the stream and flushes it (the caller checks the stream).
  void finish();

 private:
  struct Level {
    bool object = false;
    bool empty = true;
    std::string last_key;
  };
  void before_value();  // the separator and indentation an element or a key's value needs
  void newline_indent(std::size_t depth);
  void open(bool object);
  JsonWriter& close(bool object);
  void spill();  // hands the buffer to the stream once it is large

  std::ostream& out_;
  int indent_;
  std::string buf_;
  std::vector<Level> levels_;  // [0, depth_) are open
  std::size_t depth_ = 0;
  bool after_key_ = false;
};

}  // namespace popkit::planner
