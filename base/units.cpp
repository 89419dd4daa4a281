// Exact parsing of byte sizes, and the formats of tables and summaries; see units.h.
#include "base/units.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <utility>

#include "base/suggest.h"

namespace popkit {
namespace {

constexpr std::uint64_t kKi = 1024;
constexpr std::array<std::pair<std::string_view, std::uint64_t>, 10> kUnits{{
    {"", 1},
    {"B", 1},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000ULL * 1000 * 1000},
    {"TB", 1000ULL * 1000 * 1000 * 1000},
    {"KiB", kKi},
    {"MiB", kKi* kKi},
    {"GiB", kKi* kKi* kKi},
    {"TiB", kKi* kKi* kKi* kKi},
}};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

std::optional<std::uint64_t> parse_bytes(std::string_view text, std::string& error) {
  std::size_t i = 0;
  std::uint64_t mantissa = 0;
  std::size_t n_digits = 0;
  bool overflow = false;
  auto push_digit = [&](char c) {
    if (__builtin_mul_overflow(mantissa, std::uint64_t{10}, &mantissa) ||
        __builtin_add_overflow(mantissa, static_cast<std::uint64_t>(c - '0'), &mantissa)) {
      overflow = true;
    }
  };
  for (; i < text.size() && is_digit(text[i]); ++i, ++n_digits) push_digit(text[i]);
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(start, i - start);
    n_digits += fraction.size();
    // Trailing zeros change nothing and only risk overflow.
    while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
    for (char c : fraction) push_digit(c);
  }
  if (n_digits == 0) {
    error = fmt::format(
        "'{}' is not a size; write bytes as an integer or with a unit, e.g. "
        "900MiB ({})",
        text, kByteUnits);
    return std::nullopt;
  }
  if (i < text.size() && text[i] == ' ') ++i;
  const std::string_view unit = text.substr(i);
  std::uint64_t scale = 0;
  for (const auto& [name, value] : kUnits) {
    if (name == unit) scale = value;
  }
  if (scale == 0) {
    std::vector<std::string> names;
    for (const auto& u : kUnits) {
      if (!u.first.empty()) names.emplace_back(u.first);
    }
    const auto hint = did_you_mean(unit, names);
    error = fmt::format("unknown unit '{}' in '{}'{} (units: {})", unit, text, hint, kByteUnits);
    return std::nullopt;
  }
  std::uint64_t divisor = 1;
  for (std::size_t k = 0; k < fraction.size(); ++k) {
    if (__builtin_mul_overflow(divisor, std::uint64_t{10}, &divisor)) overflow = true;
  }
  std::uint64_t scaled = 0;
  if (overflow || __builtin_mul_overflow(mantissa, scale, &scaled)) {
    error = fmt::format("'{}' does not fit in 64 bits of bytes", text);
    return std::nullopt;
  }
  if (scaled % divisor != 0) {
    error = fmt::format("'{}' is not a whole number of bytes", text);
    return std::nullopt;
  }
  return scaled / divisor;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 4> kShown{"B", "KiB", "MiB", "GiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kShown.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kShown[unit]);
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

std::string format_rate(double per_second) {
  const double v = std::fabs(per_second);
  return format_thousands(per_second, v < 1 ? 3 : v < 10 ? 2 : v < 100 ? 1 : 0);
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

}  // namespace popkit
