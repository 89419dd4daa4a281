// Printable names of plan enums (plan files, text printouts, reports), and their
// inverses for reading plan files (nullopt for an unknown name).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "planner/plan.h"

namespace popkit::planner {

std::string_view tensor_class_name(TensorClass c);
std::string_view op_kind_name(OpKind k);
std::string_view dtype_name(DType t);
std::string_view activation_name(Activation a);
std::string_view io_mode_name(IoMode m);
std::string_view execution_mode_name(config::ExecutionMode m);
std::string_view variable_role_name(VariableRole r);
std::string_view stream_name(Stream s);
std::string_view reduce_op_name(ReduceOp r);
std::string_view retrieval_mode_name(RetrievalMode m);
std::string_view optimizer_type_name(config::OptimizerType t);

// The names of every value of an enum, in declaration order (for schemas and errors).
template <typename E>
std::vector<std::string_view> enum_names();

template <typename E>
std::optional<E> parse_enum(std::string_view name);

}  // namespace popkit::planner
