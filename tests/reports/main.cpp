#define BOOST_TEST_MODULE reports
#include <boost/test/unit_test.hpp>
