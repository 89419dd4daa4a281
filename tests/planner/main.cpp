#define BOOST_TEST_MODULE planner
#include <boost/test/unit_test.hpp>
