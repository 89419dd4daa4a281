// Helpers of the planner tests: ops as one line each ("kind label"), repeat bodies
// indented, so a schedule is asserted as a list of strings.
#pragma once

#include <string>
#include <vector>

#include "planner/names.h"
#include "planner/plan.h"

namespace popkit::planner::test {

inline void op_lines(const std::vector<Op>& ops, std::vector<std::string>& out,
                     const std::string& indent = "") {
  for (const Op& op : ops) {
    out.push_back(indent + std::string(op_kind_name(op.kind)) + " " + op.label);
    if (op.kind == OpKind::kRepeat) op_lines(op.body, out, indent + "  ");
  }
}

inline std::vector<std::string> op_lines(const std::vector<Op>& ops) {
  std::vector<std::string> out;
  op_lines(ops, out);
  return out;
}

inline const Op& repeat_of(const Phase& phase) {
  for (const Op& op : phase.ops)
    if (op.kind == OpKind::kRepeat) return op;
  throw std::runtime_error("phase without a repeat: " + phase.name);
}

inline int tensor_index(const Plan& plan, const std::string& name) {
  for (std::size_t i = 0; i < plan.tensors.size(); ++i)
    if (plan.tensors[i].name == name) return static_cast<int>(i);
  throw std::runtime_error("no tensor " + name);
}

inline const Variable& variable(const Plan& plan, const std::string& name) {
  for (const auto& v : plan.variables)
    if (v.name == name) return v;
  throw std::runtime_error("no variable " + name);
}

inline const RemoteBuffer& buffer(const Plan& plan, const std::string& name) {
  for (const auto& b : plan.buffers)
    if (b.name == name) return b;
  throw std::runtime_error("no buffer " + name);
}

}  // namespace popkit::planner::test
