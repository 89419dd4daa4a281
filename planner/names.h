// The names of the plan's enums, as plan files, text printouts and reports spell them:
// one table per enum, read through base/names.h (enum_name, parse_enum, enum_names),
// which also reads the config's enums that a plan carries (config/names.h).
#pragma once

#include <string_view>

#include "base/names.h"
#include "config/names.h"
#include "planner/plan.h"

namespace popkit::planner {

NameTable<TensorClass> name_table(TensorClass);
NameTable<OpKind> name_table(OpKind);
NameTable<VariableRole> name_table(VariableRole);
NameTable<InitKind> name_table(InitKind);
NameTable<Stream> name_table(Stream);
NameTable<Program> name_table(Program);
NameTable<ReduceOp> name_table(ReduceOp);

std::string_view tensor_class_name(TensorClass c);
std::string_view op_kind_name(OpKind k);

}  // namespace popkit::planner
