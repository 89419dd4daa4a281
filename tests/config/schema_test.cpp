// schemas/config.schema.json describes exactly the keys the loader accepts, every key
// has a description, its enums and kind entries are the name and kind tables, and the
// schema compiled into popplan is the file.
#include "config/yaml/schema.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "config/layer_kinds.h"
#include "config/names.h"
#include "config/optimizer_kinds.h"
#include "config/yaml/keys.h"
#include "config/yaml/profile.h"

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

// The schema's enums are the name tables the loader reads (config/names.h) and the kind
// tables' names and choices (config/layer_kinds.h, config/optimizer_kinds.h), value for
// value and in order, so the two cannot drift apart.
BOOST_AUTO_TEST_CASE(schema_enums_are_the_name_tables) {
  const json schema = json::parse(read(kSchemaPath));
  std::map<std::string, std::vector<std::string>> enums;
  std::function<void(const json&, const std::string&)> walk_enums = [&](const json& node,
                                                                        const std::string& path) {
    if (node.contains("enum")) enums[path] = node["enum"].get<std::vector<std::string>>();
    if (node.contains("properties")) {
      for (const auto& [key, value] : node["properties"].items())
        walk_enums(value, path.empty() ? key : path + "." + key);
    }
    if (node.contains("items") && node["items"].is_object()) walk_enums(node["items"], path + "[]");
  };
  walk_enums(schema, "");
  auto strings = [](const std::vector<std::string_view>& names) {
    return std::vector<std::string>(names.begin(), names.end());
  };
  std::map<std::string, std::vector<std::string>> tables{
      {"model.layers[].type", strings(layer_kind_names())},
      {"model.loss", strings(popkit::enum_names<Loss>())},
      {"model.init.biases", strings(popkit::names_in(bias_init_names()))},
      {"variables.retrieval_mode", strings(popkit::enum_names<RetrievalMode>())},
      {"execution.mode", strings(popkit::enum_names<ExecutionMode>())},
      {"execution.io_mode", strings(popkit::enum_names<IoMode>())},
      {"execution.io_schedule", strings(popkit::enum_names<IoSchedule>())},
      {"execution.sync_pattern", strings(popkit::enum_names<SyncPattern>())},
      {"training.optimizer.type", strings(optimizer_kind_names())},
      {"data.dataset", strings(popkit::enum_names<Dataset>())},
  };
  // Each kind's choices, under the section that holds its keys.
  auto add_choices = [&](const std::string& section, const auto& kinds) {
    for (const auto& kind : kinds)
      for (const KindKey& key : kind.keys)
        if (key.type == KeyType::kChoice)
          tables[section + "." + std::string(key.name)] = strings(key.choices());
  };
  add_choices("model.layers[]", layer_kind_rules());
  add_choices("training.optimizer", optimizer_kind_rules());
  BOOST_TEST(enums.size() == tables.size());
  for (const auto& [path, names] : tables) {
    BOOST_TEST_CONTEXT(path) {
      BOOST_REQUIRE(enums.count(path) == 1u);
      BOOST_TEST(enums.at(path) == names, boost::test_tools::per_element());
    }
  }
  // Explicit phase items: <layer>.<pass> with the passes' names.
  const std::string item_pattern = schema["properties"]["execution"]["properties"]["phases"]
                                         ["oneOf"][1]["items"]["items"]["pattern"];
  const auto passes = strings(popkit::enum_names<Pass>());
  BOOST_TEST(item_pattern.ends_with("\\.(" + passes[0] + "|" + passes[1] + ")$"));
}

// device.profile: a built-in profile's name, listed as the files of share/profiles are,
// or a profile file's path, which ends as the pattern says; a value with a '/' is a path
// too (the loader does not look it up as a name), but one the loader refuses unread.
BOOST_AUTO_TEST_CASE(schema_profiles_are_the_profile_files) {
  const json schema = json::parse(read(kSchemaPath));
  const json& any = schema["properties"]["device"]["properties"]["profile"]["anyOf"];
  BOOST_TEST(any[0]["enum"].get<std::vector<std::string>>() == builtin_profile_names(),
             boost::test_tools::per_element());
  const std::regex path(any[1]["pattern"].get<std::string>());
  for (const std::string spec : {"ipu-mk2", "./my.yaml", "p.yml", "p.json", "cpu"})
    BOOST_TEST_CONTEXT(spec) {
      BOOST_TEST(std::regex_search(spec, path) == is_profile_path(spec));
    }
  for (const std::string spec : {"a/b", "/etc/passwd"}) BOOST_TEST_CONTEXT(spec) {
      BOOST_TEST(is_profile_path(spec));
      BOOST_TEST(!std::regex_search(spec, path));
    }
}

// A section whose keys depend on a kind has one if/then entry per kind in `allOf`: when
// `type` is that kind (or absent, for the default kind), the kind's required keys are
// required and every other kind's keys are refused, as the kind tables
// (config/layer_kinds.h, config/optimizer_kinds.h) say and the loader does.
template <typename Kinds>
void check_kind_entries(const json& section, Kinds kinds,
                        const std::vector<std::string_view>& all) {
  const json& entries = section.at("allOf");
  BOOST_TEST(entries.size() == kinds.size());
  const std::string default_kind = section.at("properties").at("type").at("default");
  for (const auto& kind : kinds) {
    const std::string name(kind.type);
    BOOST_TEST_CONTEXT(name) {
      const json* entry = nullptr;
      for (const json& e : entries)
        if (e.at("if").at("properties").at("type").at("const") == name) entry = &e;
      BOOST_REQUIRE(entry != nullptr);
      // Without `required: [type]` the condition holds when type is absent.
      BOOST_TEST(entry->at("if").contains("required") == (name != default_kind));
      std::vector<std::string> required, refused;
      for (const auto& key : kind.keys)
        if (key.required()) required.emplace_back(key.name);
      for (const std::string_view key : all) {
        const bool own = std::any_of(kind.keys.begin(), kind.keys.end(),
                                     [&](const auto& k) { return k.name == key; });
        if (!own) refused.emplace_back(key);
      }
      const json& then = entry->at("then");
      BOOST_TEST(then.value("required", std::vector<std::string>{}) == required,
                 boost::test_tools::per_element());
      std::vector<std::string> schema_refused;
      for (const json& r : then.at("not").at("anyOf"))
        schema_refused.push_back(r.at("required").at(0));
      BOOST_TEST(schema_refused == refused, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(schema_kind_entries_are_the_kind_tables) {
  const json schema = json::parse(read(kSchemaPath));
  check_kind_entries(schema["properties"]["model"]["properties"]["layers"]["items"],
                     layer_kind_rules(), layer_kind_keys());
  check_kind_entries(schema["properties"]["training"]["properties"]["optimizer"],
                     optimizer_kind_rules(), optimizer_kind_keys());
}

BOOST_AUTO_TEST_CASE(compiled_schema_is_the_file) {
  BOOST_TEST(std::string(config_schema_json()) == read(kSchemaPath));
}

BOOST_AUTO_TEST_SUITE_END()
