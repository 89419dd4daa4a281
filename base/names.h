// Names of enum values, as files, messages and printouts spell them: one table per enum,
// in the library that declares the enum (config/names.h, planner/names.h,
// reports/table.h). That library declares `NameTable<E> name_table(E)` beside the enum,
// found by argument-dependent lookup, and everyone reads names through these functions,
// so no name is spelled twice:
//
//   enum_name(config::IoMode::kIoOverlapped)   // "io_overlapped"
//   parse_enum<config::IoMode>("io")           // config::IoMode::kIo; nullopt if unknown
//   enum_names<config::IoMode>()               // {"compute", "io", "io_overlapped"}
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace popkit {

// (value, name) pairs, in the enum's declaration order (the order of error messages).
template <typename E>
using NameTable = std::span<const std::pair<E, std::string_view>>;

// What a library defines its tables as: constexpr NameArray<IoMode, 3> kIoModes{...}.
template <typename E, std::size_t N>
using NameArray = std::array<std::pair<E, std::string_view>, N>;

// The name of `value` in `table`, "?" for a value without one.
template <typename E>
std::string_view name_in(NameTable<E> table, E value) {
  for (const auto& [e, name] : table)
    if (e == value) return name;
  return "?";
}

template <typename E>
std::optional<E> parse_in(NameTable<E> table, std::string_view name) {
  for (const auto& [e, n] : table)
    if (n == name) return e;
  return std::nullopt;
}

template <typename E>
std::vector<std::string_view> names_in(NameTable<E> table) {
  std::vector<std::string_view> out;
  for (const auto& [e, name] : table) out.push_back(name);
  return out;
}

template <typename E>
std::string_view enum_name(E value) {
  return name_in<E>(name_table(E{}), value);
}

template <typename E>
std::optional<E> parse_enum(std::string_view name) {
  return parse_in<E>(name_table(E{}), name);
}

template <typename E>
std::vector<std::string_view> enum_names() {
  return names_in<E>(name_table(E{}));
}

}  // namespace popkit
