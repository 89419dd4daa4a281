// InputError: a plan or run file that cannot be read (not JSON, wrong kind, newer
// version, a missing or ill-typed field), or a bad report option. The message names the
// file and the field; the CLI maps it to exit code 2 (invalid input).
#pragma once

#include "base/error.h"

namespace popkit::reports {

class InputError : public Error {
 public:
  using Error::Error;
};

}  // namespace popkit::reports
