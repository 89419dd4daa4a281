// popkit::Error: the one exception type for run-time failures (I/O, divergence, out of
// device memory, corrupt files). Built with fmt arguments; each tool catches it in
// one place, prints "TOOL: error: MESSAGE" and exits 1. Bad config input is not an
// exception: it is collected as diagnostics (config/diagnostics.h).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace popkit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}

  template <typename... Args>
  explicit Error(fmt::format_string<Args...> format, Args&&... args)
      : std::runtime_error(fmt::format(format, std::forward<Args>(args)...)) {}
};

// A failure the ranks of a multi-process run agreed on before any of them began to
// wait for another (runner: set-up, the config): the lowest rank that failed prints it
// (`print`), the others exit with the same code in silence, and no rank is aborted.
class AgreedError : public Error {
 public:
  AgreedError(const std::string& message, bool print, int exit_code)
      : Error(message), print_(print), exit_code_(exit_code) {}
  [[nodiscard]] bool print() const { return print_; }
  [[nodiscard]] int exit_code() const { return exit_code_; }

 private:
  bool print_;
  int exit_code_;
};

// A bug, never user input: abort with file and line.
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line);

}  // namespace popkit

#define POPKIT_ASSERT(expr) \
  ((expr) ? static_cast<void>(0) : ::popkit::assertion_failed(#expr, __FILE__, __LINE__))
