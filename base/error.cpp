// Where failed assertions end: one line naming the broken invariant, then abort.
#include "base/error.h"

#include <cstdio>
#include <cstdlib>

namespace popkit {

void assertion_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "popkit: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
  std::abort();
}

}  // namespace popkit
