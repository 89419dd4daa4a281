#define BOOST_TEST_MODULE transformer
#include <boost/test/unit_test.hpp>
