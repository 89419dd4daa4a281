// The kind tables agree: every layer and optimizer kind of the config's tables has an entry
// under the same name in the planner's; a kind's keys never take the name of a field plan
// files write beside them; and a planner entry's operands are what the builder, the
// operand walk and the cost model rely on (planner/layer_kinds.h).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <set>
#include <string>
#include <vector>

#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/layer_kinds.h"
#include "planner/layer_ops.h"
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
        for (const char* field : {"name", "type", "in_features", "graph", "row", "sequence"})
          BOOST_TEST(key.name != field);
        if (key.name == "out_features") {
          BOOST_TEST((key.type == config::KeyType::kInteger));
          BOOST_TEST(kind.width_key == "out_features");
          const config::Layer layer =
              config::make_layer("l", kind.type, {{"out_features", std::int64_t{7}}});
          BOOST_TEST(kind.out_shape(layer.attributes, {3, 1}).width == 7);
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

// A forward reads the layer's input first and writes its output first (the cost model
// and the workspace pass read the micro-batch's rows from the first input); a backward
// reads dy, writes dx first, and accumulates a gradient per parameter; every index names
// a declared parameter or saved tensor, and the positions of a list have distinct names.
BOOST_AUTO_TEST_CASE(operands_are_what_the_builder_fills) {
  using planner::Operand;
  using planner::OperandRole;
  for (const planner::LayerKind& kind : planner::layer_kinds()) {
    BOOST_TEST_CONTEXT(kind.type) {
      BOOST_REQUIRE(!kind.forward_inputs.empty());
      BOOST_REQUIRE(!kind.forward_outputs.empty());
      BOOST_REQUIRE(!kind.backward_outputs.empty());
      BOOST_TEST((kind.forward_inputs[0].role == OperandRole::kIn));
      BOOST_TEST((kind.forward_outputs[0].role == OperandRole::kOut));
      BOOST_TEST((kind.backward_outputs[0].role == OperandRole::kDx));
      std::vector<int> grads;
      bool dy = false;
      for (const auto list : {kind.forward_inputs, kind.forward_outputs, kind.backward_inputs,
                              kind.backward_outputs, kind.backward_state}) {
        std::set<std::string_view> names;
        for (const Operand& o : list) {
          BOOST_TEST(names.insert(o.name).second, "two positions named " << o.name);
          if (o.role == OperandRole::kParam || o.role == OperandRole::kGrad)
            BOOST_TEST((o.index >= 0 && static_cast<std::size_t>(o.index) < kind.params.size()));
          if (o.role == OperandRole::kSaved)
            BOOST_TEST((o.index >= 0 && static_cast<std::size_t>(o.index) < kind.saved.size()));
          if (o.role == OperandRole::kGrad) grads.push_back(o.index);
          dy = dy || o.role == OperandRole::kDy;
        }
      }
      BOOST_TEST(dy);
      std::sort(grads.begin(), grads.end());
      BOOST_TEST(grads.size() == kind.params.size());
      for (std::size_t p = 0; p < grads.size(); ++p) BOOST_TEST(grads[p] == static_cast<int>(p));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
