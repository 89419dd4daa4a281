// The drawing kit of reports/chart.cpp: SVG 1.1 primitives, "nice" axis ticks (1, 2 or
// 5 × 10^k, 4 to 6 of them), the unit an axis reads in (bytes: B to GiB; seconds: µs to
// s), and text fitted to a width by an estimate of its advance, since an SVG writer
// cannot measure glyphs and a renderer clips what runs past the edge.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace popkit::reports::svg {

// Ticks from 0 (or `lo` when it is below 0) up to the first tick >= `hi`, 1-2-5 steps,
// about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// The unit an axis of values up to `max` reads in: a name and the divisor.
struct AxisUnit {
  std::string name;  // "KiB", "ms", "" for plain numbers
  double divisor = 1.0;
};
AxisUnit bytes_unit(double max_bytes);
AxisUnit seconds_unit(double max_seconds);

// A tick label: "0", "2.5", "1,000".
std::string tick_label(double value);

// The estimated advance of `text` in sans-serif at `size` px: 0.6 em a character, an
// upper bound for Latin text in DejaVu Sans, Liberation Sans and Arial.
double text_width(const std::string& text, int size);
// `text` cut with "..." to fit `width` px at `size`.
std::string fit(const std::string& text, double width, int size);

std::string escape(const std::string& s);

// The XML declaration and the <svg> element of a `width` x `height` picture on a white
// background; the caller closes it with "</svg>\n".
void open(std::ostream& out, int width, int height);

void text(std::ostream& out, double x, double y, const std::string& s, const char* anchor = "start",
          int size = 12, const char* extra = "");
void rect(std::ostream& out, double x, double y, double w, double h, const std::string& fill);
void line(std::ostream& out, double x1, double y1, double x2, double y2, const char* stroke,
          double width = 1.0);

// Distinct colours for series: runs and sources in comparisons.
const std::string& series_colour(std::size_t i);

}  // namespace popkit::reports::svg
