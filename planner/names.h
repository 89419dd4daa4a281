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
std::string_view retrieval_mode_name(RetrievalMode m);

// The name of any plan enum's value ("?" for a value without one).
template <typename E>
std::string_view enum_name(E value);

// The names of every value of an enum, in declaration order (for schemas and errors).
template <typename E>
std::vector<std::string_view> enum_names();

template <typename E>
std::optional<E> parse_enum(std::string_view name);

}  // namespace popkit::planner
