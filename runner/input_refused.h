// InputRefused: input found wrong at run time (a checkpoint of another config or a
// damaged one, a folder in use, a rank count that does not divide the replicas). Like
// an invalid config it exits 2; a run that failed exits 1 (base/error.h).
#pragma once

#include "base/error.h"

namespace popkit::runner {

class InputRefused : public Error {
 public:
  using Error::Error;
};

}  // namespace popkit::runner
