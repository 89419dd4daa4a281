// Printable names of plan enums (plan files, text printouts, reports).
#pragma once

#include <string_view>

#include "planner/plan.h"

namespace popkit::planner {

std::string_view tensor_class_name(TensorClass c);
std::string_view op_kind_name(OpKind k);

}  // namespace popkit::planner
