// The data order: permutations from (seed, epoch) only, identity without shuffle,
// canonical positions at the end of an epoch.
#include "runner/data_order.h"

#include <boost/test/unit_test.hpp>
#include <numeric>
#include <vector>

using namespace popkit::runner;

BOOST_AUTO_TEST_SUITE(data_order)

BOOST_AUTO_TEST_CASE(shuffle_is_a_permutation_fixed_by_seed_and_epoch) {
  const auto a = epoch_order(1000, 42, 3, true);
  std::vector<std::int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  BOOST_TEST(sorted == identity);
  BOOST_TEST(a != identity);
  BOOST_TEST(epoch_order(1000, 42, 3, true) == a);
  BOOST_TEST(epoch_order(1000, 42, 4, true) != a);
  BOOST_TEST(epoch_order(1000, 43, 3, true) != a);
}

BOOST_AUTO_TEST_CASE(no_shuffle_is_the_identity) {
  std::vector<std::int64_t> identity(10);
  std::iota(identity.begin(), identity.end(), 0);
  BOOST_TEST(epoch_order(10, 42, 5, false) == identity);
}

// Pinned values: the order must not change between builds, or old checkpoints resume
// onto different data.
BOOST_AUTO_TEST_CASE(order_is_pinned) {
  const auto a = epoch_order(8, 42, 0, true);
  const std::vector<std::int64_t> want = {6, 5, 2, 0, 4, 3, 7, 1};
  BOOST_TEST(a == want);
}

BOOST_AUTO_TEST_CASE(advance_moves_to_the_next_epoch_when_a_batch_no_longer_fits) {
  // 10 samples, batches of 4: positions 0, 4, then 8 + 4 > 10 -> epoch 1.
  DataPosition p;
  p = advance(p, 10, 4);
  BOOST_TEST(p.epoch == 0);
  BOOST_TEST(p.position == 4);
  p = advance(p, 10, 4);
  BOOST_TEST(p.epoch == 1);
  BOOST_TEST(p.position == 0);
  BOOST_TEST(batches_per_epoch(10, 4) == 2);
  // Exactly full: 8 samples, batches of 4.
  p = advance(advance(DataPosition{}, 8, 4), 8, 4);
  BOOST_TEST(p.epoch == 1);
  BOOST_TEST(p.position == 0);
}

BOOST_AUTO_TEST_SUITE_END()
