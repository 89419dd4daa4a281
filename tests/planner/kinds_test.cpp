// The kind tables agree: every layer and optimizer kind of the config's tables has an entry
// under the same name in the planner's, and a kind's keys never take the name of a field
// plan files write beside them.
#include <boost/test/unit_test.hpp>
#include <string>

#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/layer_kinds.h"
#include "planner/optimizer_kinds.h"

using namespace popkit;

BOOST_AUTO_TEST_SUITE(kinds)

BOOST_AUTO_TEST_CASE(every_config_kind_has_a_planner_entry) {
  for (const config::LayerKindRules& kind : config::layer_kind_rules())
    BOOST_TEST(planner::layer_kind(kind.type).type == kind.type);
  for (const config::OptimizerKindRules& kind : config::optimizer_kind_rules())
    BOOST_TEST(planner::optimizer_kind(kind.type).type == kind.type);
}

// A plan file's layer holds its kind's keys beside name, type, in_features, out_features,
// graph and row (planner/plan_json.cpp); only a kind whose key sets its output's width
// names it out_features, and then it is that width.
BOOST_AUTO_TEST_CASE(kind_keys_leave_the_layer_fields_alone) {
  for (const config::LayerKindRules& kind : config::layer_kind_rules())
    for (const config::KindKey& key : kind.keys) {
      BOOST_TEST_CONTEXT(kind.type << "." << key.name) {
        for (const char* field : {"name", "type", "in_features", "graph", "row"})
          BOOST_TEST(key.name != field);
        if (key.name == "out_features") {
          BOOST_TEST((key.type == config::KeyType::kInteger));
          BOOST_TEST(kind.width_key == "out_features");
          const config::Layer layer =
              config::make_layer("l", kind.type, {{"out_features", std::int64_t{7}}});
          BOOST_TEST(kind.out_width(layer.attributes, 3) == 7);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(optimizer_keys_leave_the_common_keys_alone) {
  for (const config::OptimizerKindRules& kind : config::optimizer_kind_rules())
    for (const config::KindKey& key : kind.keys)
      for (const std::string_view common : config::common_optimizer_keys())
        BOOST_TEST(key.name != common);
}

BOOST_AUTO_TEST_SUITE_END()
