#include "reports/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "base/units.h"

namespace popkit::reports::svg {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  lo = std::min(lo, 0.0);
  if (!(hi > lo) || !std::isfinite(hi) || !std::isfinite(lo)) hi = lo + 1.0;
  // step = 1, 2 or 5 × 10^k: of those near (hi - lo) / (target - 1), the one whose
  // tick count is closest to target (a step just over the rough one can halve it).
  const double rough = (hi - lo) / std::max(target - 1, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  const auto count = [&](double step) {
    return static_cast<int>(std::ceil(hi / step - 1e-9) - std::floor(lo / step + 1e-9)) + 1;
  };
  double step = magnitude;
  for (const double scale : {0.1, 1.0, 10.0}) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double candidate = m * magnitude * scale;
      if (std::abs(count(candidate) - target) < std::abs(count(step) - target)) step = candidate;
    }
  }
  std::vector<double> ticks;
  const auto first = static_cast<std::int64_t>(std::floor(lo / step + 1e-9));
  for (std::int64_t k = first;; ++k) {
    // k × step at 12 significant digits, so 3 × 0.1 is 0.3, not 0.30000000000000004.
    ticks.push_back(std::stod(fmt::format("{:.12g}", static_cast<double>(k) * step)));
    if (ticks.back() >= hi * (1.0 - 1e-9) || ticks.size() > 12) break;
  }
  return ticks;
}

AxisUnit bytes_unit(double max_bytes) {
  if (max_bytes >= 1024.0 * 1024 * 1024) return {"GiB", 1024.0 * 1024 * 1024};
  if (max_bytes >= 1024.0 * 1024) return {"MiB", 1024.0 * 1024};
  if (max_bytes >= 1024.0) return {"KiB", 1024.0};
  return {"B", 1.0};
}

AxisUnit seconds_unit(double max_seconds) {
  if (max_seconds >= 1.0) return {"s", 1.0};
  if (max_seconds >= 1e-3) return {"ms", 1e-3};
  return {"\u00b5s", 1e-6};
}

std::string tick_label(double value) {
  if (value == 0.0) return "0";
  if (std::fabs(value) >= 1000.0 && value == std::round(value)) return format_thousands(value);
  return fmt::format("{:.6g}", value);
}

double text_width(const std::string& text, int size) {
  // Count code points, not bytes: "µs" is two characters wide, not three.
  std::size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return 0.6 * size * static_cast<double>(n);
}

std::string fit(const std::string& text, double width, int size) {
  if (text_width(text, size) <= width) return text;
  const auto n = static_cast<std::size_t>(std::max(0.0, width / (0.6 * size) - 3));
  std::string cut = text.substr(0, n);
  // Do not leave half a UTF-8 sequence at the cut.
  while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80) cut.pop_back();
  if (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0x80) != 0) cut.pop_back();
  return cut + "...";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void open(std::ostream& out, int width, int height) {
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\">\n",
      width, height);
  rect(out, 0, 0, width, height, "#ffffff");
}

void text(std::ostream& out, double x, double y, const std::string& s, const char* anchor, int size,
          const char* extra) {
  out << fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-family=\"sans-serif\" font-size=\"{}\" "
      "text-anchor=\"{}\"{}>{}</text>\n",
      x, y, size, anchor, extra, escape(s));
}

void rect(std::ostream& out, double x, double y, double w, double h, const std::string& fill) {
  out << fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", x, y,
      std::max(w, 0.0), std::max(h, 0.0), fill);
}

void line(std::ostream& out, double x1, double y1, double x2, double y2, const char* stroke,
          double width) {
  out << fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"{}/>\n", x1, y1,
      x2, y2, stroke, width == 1.0 ? "" : fmt::format(" stroke-width=\"{}\"", width));
}

const std::string& series_colour(std::size_t i) {
  // Tableau 10: distinct in colour and in lightness.
  static const std::array<std::string, 10> kColours = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                       "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                                                       "#9c755f", "#bab0ac"};
  return kColours[i % kColours.size()];
}

}  // namespace popkit::reports::svg
