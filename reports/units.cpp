#include "reports/units.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace popkit::reports {

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 4> kUnits{"B", "KiB", "MiB", "GiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

std::string format_thousands(double value, int decimals) {
  const bool negative = value < 0;
  std::string digits = fmt::format("{:.{}f}", std::fabs(value), decimals);
  const std::size_t dot = digits.find('.');
  std::string whole = digits.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : digits.substr(dot);
  std::string grouped;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) grouped += ',';
    grouped += whole[i];
  }
  return (negative ? "-" : "") + grouped + frac;
}

std::string format_byte_difference(std::uint64_t a, std::uint64_t b) {
  if (a == b) return "0 B";
  return a > b ? "+" + format_bytes(a - b) : "-" + format_bytes(b - a);
}

std::string format_seconds(double seconds) {
  if (seconds == 0.0) return "0 s";
  const double magnitude = std::fabs(seconds);
  if (magnitude >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (magnitude >= 1.0e-3) return fmt::format("{:.3f} ms", seconds * 1.0e3);
  return fmt::format("{:.1f} µs", seconds * 1.0e6);
}

std::string format_change(double fraction) {
  const double percent = fraction * 100.0;
  if (std::fabs(percent) < 0.05) return "+0.0%";
  return fmt::format("{:+.1f}%", percent);
}

}  // namespace popkit::reports
