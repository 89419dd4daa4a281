// RTS: shard size ceil(nelms / S), padding, the decisions per variable, flat indices of
// batch-serial buffers.
#include "planner/sharding.h"

#include <boost/test/unit_test.hpp>

#include "config/layer_kinds.h"
#include "config/optimizer_kinds.h"
#include "planner/build.h"
#include "tests/planner/configs.h"
#include "tests/planner/helpers.h"

using namespace popkit::planner;

BOOST_AUTO_TEST_SUITE(sharding)

BOOST_AUTO_TEST_CASE(shard_size_is_ceil_and_the_tail_is_padding) {
  BOOST_TEST(shard_size(401408, 2) == 200704);
  BOOST_TEST(shard_padding(401408, 2) == 0);
  BOOST_TEST(shard_size(10, 4) == 3);  // 3 + 3 + 3 + 1, 2 zeros
  BOOST_TEST(shard_padding(10, 4) == 2);
  BOOST_TEST(shard_valid_elements(10, 4, 3) == 1);
  BOOST_TEST(shard_size(5, 8) == 1);  // ranks 5..7 hold only padding
  BOOST_TEST(shard_padding(5, 8) == 3);
  BOOST_TEST(shard_valid_elements(5, 8, 6) == 0);
}

BOOST_AUTO_TEST_CASE(variables_at_or_over_the_threshold_are_sharded) {
  auto c = test::mnist_phased();
  c.replication.factor = 4;
  c.replication.groupings = {{"everyone", 4, 1}};
  c.sharding.threshold = 513;
  const Plan p = build_plan(c);
  const Variable& w = test::variable(p, "fc4.weight");  // 512 x 10 = 5120
  BOOST_TEST(w.sharded);
  BOOST_TEST(w.shard_size == 1280);
  BOOST_TEST(w.padding == 0);
  BOOST_TEST(!test::variable(p, "fc1.bias").sharded);  // 512 < 513
  const Variable& m = test::variable(p, "fc4.weight.adam_m");
  BOOST_TEST(m.sharded);
  BOOST_TEST((m.dtype == DType::kFloat16));
  BOOST_TEST((test::variable(p, "fc4.weight.adam_v").dtype == DType::kFloat32));
  // The buffer's element is the shard; the meta shape stays full.
  const RemoteBuffer& b = test::buffer(p, "fc4.weight");
  BOOST_TEST(b.element_shape == std::vector<std::int64_t>{1280}, boost::test_tools::per_element());
  BOOST_TEST(w.meta_shape == (std::vector<std::int64_t>{512, 10}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(padding_when_the_shards_do_not_divide) {
  auto c = test::mnist_phased();
  c.model.layers.back().attributes.set("out_features", 7);  // fc4.weight 512 x 7 = 3584 over 3
  c.replication.factor = 3;
  c.replication.groupings = {{"everyone", 3, 1}};
  c.model.input_shape = {5};  // fc1.weight 5 x 512 = 2560
  const Plan p = build_plan(c);
  BOOST_TEST(test::variable(p, "fc4.weight").shard_size == 1195);  // ceil(3584 / 3)
  BOOST_TEST(test::variable(p, "fc4.weight").padding == 1);        // 3 * 1195 - 3584
  BOOST_TEST(test::variable(p, "fc1.weight").shard_size == 854);   // ceil(2560 / 3)
  BOOST_TEST(test::variable(p, "fc1.weight").padding == 2);
}

BOOST_AUTO_TEST_CASE(sharding_group_of_one_shards_nothing) {
  auto c = test::mnist_phased();
  c.replication.groupings = {{"everyone", 2, 1}, {"solo", 1, 1}};
  c.sharding.grouping = "solo";
  const Plan p = build_plan(c);
  for (const auto& v : p.variables) BOOST_TEST(!v.sharded);
  BOOST_TEST(p.sharding_threshold == 0);
}

BOOST_AUTO_TEST_CASE(flat_index_is_row_times_steps_plus_step) {
  const Plan p = build_plan(test::mnist_phased());
  const RemoteBuffer& x = test::buffer(p, "x");
  BOOST_TEST(x.rows == 3);
  BOOST_TEST(x.steps == 4);
  BOOST_TEST(x.entries() == 12);
  BOOST_TEST(x.flat_index(0, 0) == 0);
  BOOST_TEST(x.flat_index(1, 3) == 7);
  BOOST_TEST(x.flat_index(2, 3) == 11);
}

BOOST_AUTO_TEST_SUITE_END()
