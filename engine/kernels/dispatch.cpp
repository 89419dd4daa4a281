// Chooses the kernel level once per process: POPKIT_CPU_LEVEL when set, else the highest
// level cpuid says this CPU and its operating system run (__builtin_cpu_supports checks
// XCR0 too, so AVX-512 disabled by the OS is not chosen).
#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "engine/kernels/kernels.h"

namespace popkit::engine {
namespace {

constexpr std::span<const Kernels* const> kTables = KernelLevels<Kernels>::kTables;

struct Choice {
  const Kernels* kernels = nullptr;
  bool forced = false;
};

std::string level_names() {
  std::string names;
  for (const Kernels* k : kTables) names += (names.empty() ? "" : ", ") + std::string(k->level);
  return names;
}

Choice choose() {
  if (const char* want = std::getenv("POPKIT_CPU_LEVEL"); want != nullptr && *want != '\0') {
    for (const Kernels* k : kTables) {
      if (std::string_view(k->level) != want) continue;
      if (!runs_here(*k))
        throw Error("POPKIT_CPU_LEVEL={}: this CPU does not run that level's instructions ({})",
                    want, k->instructions);
      return {k, true};
    }
    throw Error("POPKIT_CPU_LEVEL={}: not a level of this build; it has {}", want, level_names());
  }
  const Kernels* best = kTables[0];
  for (const Kernels* k : kTables)
    if (runs_here(*k)) best = k;
  return {best, false};
}

const Choice& choice() {
  static const Choice c = choose();  // a throw leaves it unset: the next call throws again
  return c;
}

}  // namespace

std::span<const Kernels* const> kernel_levels() {
  return kTables;
}

bool runs_here(const Kernels& k) {
  const std::string_view level = k.level;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (level == "x86-64-v2") return __builtin_cpu_supports("x86-64-v2") != 0;
  if (level == "x86-64-v3") return __builtin_cpu_supports("x86-64-v3") != 0;
  if (level == "x86-64-v4") return __builtin_cpu_supports("x86-64-v4") != 0;
#endif
  return level == "x86-64" || level == "native";
}

const Kernels& kernels() {
  return *choice().kernels;
}

std::size_t level_index(const Kernels& level) {
  for (std::size_t i = 0; i < kTables.size(); ++i)
    if (kTables[i] == &level) return i;
  throw Error("kernel level {} is not one of this build's tables", level.level);
}

std::string kernels_in_use() {
  const Choice& c = choice();
  return fmt::format("{} ({}), {}", c.kernels->level, c.kernels->instructions,
                     c.forced ? "forced by POPKIT_CPU_LEVEL" : "chosen from cpuid");
}

}  // namespace popkit::engine
