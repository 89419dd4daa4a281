// ReplicaGrouping: the three tables of the replication chapter for R=16, both rules.
#include <boost/test/unit_test.hpp>
#include <sstream>

#include "planner/plan_text.h"
#include "planner/replica_grouping.h"

using popkit::planner::ReplicaGrouping;

BOOST_AUTO_TEST_SUITE(grouping)

BOOST_AUTO_TEST_CASE(stride_one_groups_consecutive_replicas) {
  const ReplicaGrouping g{16, 4, 1};
  BOOST_TEST(g.n_groups() == 4);
  const std::vector<std::int64_t> g0{0, 1, 2, 3}, g1{4, 5, 6, 7}, g3{12, 13, 14, 15};
  BOOST_TEST(g.members(0) == g0, boost::test_tools::per_element());
  BOOST_TEST(g.members(1) == g1, boost::test_tools::per_element());
  BOOST_TEST(g.members(3) == g3, boost::test_tools::per_element());
  // replica r is in group r / group_size, rank r % group_size
  BOOST_TEST(g.group_of(6) == 1);
  BOOST_TEST(g.rank_in_group(6) == 2);
}

BOOST_AUTO_TEST_CASE(stride_four_interleaves_replicas) {
  const ReplicaGrouping g{16, 4, 4};
  BOOST_TEST(g.n_groups() == 4);
  const std::vector<std::int64_t> g0{0, 4, 8, 12}, g1{1, 5, 9, 13}, g3{3, 7, 11, 15};
  BOOST_TEST(g.members(0) == g0, boost::test_tools::per_element());
  BOOST_TEST(g.members(1) == g1, boost::test_tools::per_element());
  BOOST_TEST(g.members(3) == g3, boost::test_tools::per_element());
  // replica r is in group r % stride, rank r / stride
  BOOST_TEST(g.group_of(9) == 1);
  BOOST_TEST(g.rank_in_group(9) == 2);
}

BOOST_AUTO_TEST_CASE(group_size_one_gives_sixteen_groups_of_one) {
  const ReplicaGrouping g{16, 1, 1};
  BOOST_TEST(g.n_groups() == 16);
  for (std::int64_t r = 0; r < 16; ++r) {
    BOOST_TEST(g.group_of(r) == r);
    BOOST_TEST(g.members(r) == std::vector<std::int64_t>{r}, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(every_replica_is_the_member_at_its_rank) {
  for (const ReplicaGrouping g : {ReplicaGrouping{16, 4, 1}, ReplicaGrouping{16, 4, 4},
                                  ReplicaGrouping{16, 2, 8}, ReplicaGrouping{16, 16, 1}})
    for (std::int64_t r = 0; r < 16; ++r)
      BOOST_TEST(g.member(g.group_of(r), g.rank_in_group(r)) == r);
}

BOOST_AUTO_TEST_CASE(table_prints_group_and_replicas) {
  std::ostringstream out;
  popkit::planner::print_grouping(out, ReplicaGrouping{16, 4, 4});
  BOOST_TEST(out.str() ==
             "Group | Replicas\n"
             "------+-------------\n"
             "    0 | 0, 4, 8, 12\n"
             "    1 | 1, 5, 9, 13\n"
             "    2 | 2, 6, 10, 14\n"
             "    3 | 3, 7, 11, 15\n");
}

BOOST_AUTO_TEST_CASE(json_lists_the_groups) {
  const auto j = popkit::planner::grouping_to_json(ReplicaGrouping{4, 2, 2});
  BOOST_TEST(j.dump() ==
             R"({"factor":4,"group_size":2,"groups":[[0,2],[1,3]],"n_groups":2,"stride":2})");
}

BOOST_AUTO_TEST_SUITE_END()
