// schemas/config.schema.json describes exactly the keys the loader accepts, every key
// has a description, and the schema compiled into popplan is the file.
#include "config/yaml/schema.h"

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/yaml/keys.h"

using namespace popkit::config;
using nlohmann::json;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Key paths in the loader's spelling: "a.b", list items "a[].b", named maps "a.*.b".
void walk(const json& node, const std::string& prefix, std::set<std::string>& keys,
          std::vector<std::string>& undocumented) {
  if (node.contains("properties")) {
    for (const auto& [key, value] : node["properties"].items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      keys.insert(path);
      if (!value.contains("description")) undocumented.push_back(path);
      walk(value, path, keys, undocumented);
    }
  }
  if (node.contains("additionalProperties") && node["additionalProperties"].is_object()) {
    walk(node["additionalProperties"], prefix + ".*", keys, undocumented);
  }
  if (node.contains("items") && node["items"].is_object()) {
    walk(node["items"], prefix + "[]", keys, undocumented);
  }
}

const std::string kSchemaPath = POPKIT_SOURCE_DIR "/schemas/config.schema.json";

}  // namespace

BOOST_AUTO_TEST_SUITE(schema)

BOOST_AUTO_TEST_CASE(schema_keys_equal_loader_keys) {
  const json schema = json::parse(read(kSchemaPath));
  std::set<std::string> schema_keys;
  std::vector<std::string> undocumented;
  walk(schema, "", schema_keys, undocumented);
  const auto loader = accepted_key_paths();
  const std::set<std::string> loader_keys(loader.begin(), loader.end());
  for (const auto& key : loader_keys) {
    BOOST_TEST(schema_keys.count(key) == 1u, "the loader accepts " << key << ", the schema not");
  }
  for (const auto& key : schema_keys) {
    BOOST_TEST(loader_keys.count(key) == 1u, "the schema has " << key << ", the loader not");
  }
  BOOST_TEST(undocumented.empty(), "keys without a description: " << undocumented.size());
  BOOST_TEST(schema["$schema"] == "https://json-schema.org/draft/2020-12/schema");
}

BOOST_AUTO_TEST_CASE(every_object_is_closed) {
  // additionalProperties: false everywhere except the named groupings map, so the schema
  // rejects unknown keys as the loader does.
  std::function<void(const json&, const std::string&)> check = [&](const json& node,
                                                                   const std::string& path) {
    if (node.contains("properties")) {
      BOOST_TEST(node.value("additionalProperties", true) == false, path << " is open");
      for (const auto& [key, value] : node["properties"].items()) check(value, path + "." + key);
    }
    if (node.contains("items") && node["items"].is_object()) check(node["items"], path + "[]");
    if (node.contains("additionalProperties") && node["additionalProperties"].is_object()) {
      check(node["additionalProperties"], path + ".*");
    }
  };
  check(json::parse(read(kSchemaPath)), "");
}

BOOST_AUTO_TEST_CASE(compiled_schema_is_the_file) {
  BOOST_TEST(std::string(config_schema_json()) == read(kSchemaPath));
}

BOOST_AUTO_TEST_SUITE_END()
