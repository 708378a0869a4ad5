#pragma once
// Line charts as a standalone SVG file that any browser opens: panels side by side, each with axes,
// ticks at round numbers, axis labels, a legend and a title. The apps draw one chart per run; a C++
// program should not need Python and matplotlib, or gnuplot, installed for that, so it writes the
// SVG itself.
//
//   svg::Panel loss{"Loss", "epoch", "cross-entropy", {{"train", "#1f77b4", {1, 2}, {0.3, 0.1}}}};
//   std::string text = svg::chart("MNIST CNN", {loss});
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace svg {

struct Series {
  std::string label, color;
  std::vector<double> x, y;  // points whose x or y is not finite are left out
};

struct Panel {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool integer_x = true;           // ticks at whole numbers only (epochs)
  double y_floor = -INFINITY;      // the y axis never goes below / above these (0 and 100 for
  double y_ceiling = INFINITY;     // a percentage), whatever round numbers the ticks fall on
};

/// An axis from `lo` to `hi` with ticks every `step`: round numbers (1, 2, 2.5 or 5 times a power of
/// ten) around [min, max], about `ticks` of them.
struct Axis {
  double lo = 0, hi = 1, step = 0.2;
};

inline Axis nice_axis(double min, double max, int ticks = 5, bool integer = false) {
  if (!std::isfinite(min) || !std::isfinite(max)) return {};
  if (!(max > min)) {  // a single value: centre it
    const double pad = min == 0 ? 1 : std::fabs(min) * 0.1;
    min -= pad, max += pad;
  }
  const double raw = (max - min) / ticks;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * magnitude;
  if (integer) step = std::max(1.0, std::round(step));
  return {std::floor(min / step + 1e-9) * step, std::ceil(max / step - 1e-9) * step, step};
}

/// `text` with the five characters XML reserves escaped.
inline std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

inline std::string number(double v, int decimals) {
  if (std::fabs(v) < 0.5 * std::pow(10, -decimals)) v = 0;  // no "-0.00" on an axis
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

// Enough decimals to tell the ticks of `step` apart.
inline int decimals_for(double step) {
  int d = 0;
  while (d < 8 && std::fabs(step * std::pow(10, d) - std::round(step * std::pow(10, d))) > 1e-6) ++d;
  return d;
}

namespace detail {

inline void panel(std::string& out, const Panel& p, double left, double top, double width, double height) {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const Series& s : p.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_min = std::min(x_min, s.x[i]), x_max = std::max(x_max, s.x[i]);
      y_min = std::min(y_min, s.y[i]), y_max = std::max(y_max, s.y[i]);
    }
  const bool empty = !std::isfinite(x_min);
  const Axis ax = empty ? Axis{0, 1, 1} : nice_axis(x_min, x_max, 6, p.integer_x);
  Axis ay = empty ? Axis{} : nice_axis(y_min, y_max);
  ay.lo = std::max(ay.lo, p.y_floor), ay.hi = std::min(ay.hi, p.y_ceiling);
  const auto px = [&](double x) { return left + (x - ax.lo) / (ax.hi - ax.lo) * width; };
  const auto py = [&](double y) { return top + height - (y - ay.lo) / (ay.hi - ay.lo) * height; };
  const auto f = [](double v) { return number(v, 2); };

  out += "<g class=\"panel\" data-title=\"" + escape(p.title) + "\">\n";
  out += "<text class=\"panel-title\" x=\"" + f(left + width / 2) + "\" y=\"" + f(top - 12) +
         "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + escape(p.title) + "</text>\n";
  out += "<rect x=\"" + f(left) + "\" y=\"" + f(top) + "\" width=\"" + f(width) + "\" height=\"" + f(height) +
         "\" fill=\"none\" stroke=\"#999\"/>\n";
  const int x_decimals = decimals_for(ax.step), y_decimals = decimals_for(ay.step);
  // Ticks by index, so that rounding never adds or drops the last one; none on a panel without data.
  for (int i = 0; !empty && ax.lo + i * ax.step <= ax.hi + ax.step * 1e-6; ++i) {
    const double v = ax.lo + i * ax.step;
    out += "<line x1=\"" + f(px(v)) + "\" y1=\"" + f(top + height) + "\" x2=\"" + f(px(v)) + "\" y2=\"" +
           f(top + height + 5) + "\" stroke=\"#333\"/>\n";
    out += "<text class=\"xtick\" x=\"" + f(px(v)) + "\" y=\"" + f(top + height + 19) + "\" text-anchor=\"middle\">" +
           number(v, x_decimals) + "</text>\n";
  }
  for (int i = 0; !empty && ay.lo + i * ay.step <= ay.hi + ay.step * 1e-6; ++i) {
    const double v = ay.lo + i * ay.step;
    out += "<line x1=\"" + f(left) + "\" y1=\"" + f(py(v)) + "\" x2=\"" + f(left + width) + "\" y2=\"" + f(py(v)) +
           "\" stroke=\"#e5e5e5\"/>\n";
    out += "<line x1=\"" + f(left - 5) + "\" y1=\"" + f(py(v)) + "\" x2=\"" + f(left) + "\" y2=\"" + f(py(v)) +
           "\" stroke=\"#333\"/>\n";
    out += "<text class=\"ytick\" x=\"" + f(left - 9) + "\" y=\"" + f(py(v)) +
           "\" text-anchor=\"end\" dy=\"0.35em\">" + number(v, y_decimals) + "</text>\n";
  }
  out += "<text class=\"x-label\" x=\"" + f(left + width / 2) + "\" y=\"" + f(top + height + 42) +
         "\" text-anchor=\"middle\">" + escape(p.x_label) + "</text>\n";
  out += "<text class=\"y-label\" x=\"" + f(left - 58) + "\" y=\"" + f(top + height / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 " + f(left - 58) + " " + f(top + height / 2) + ")\">" +
         escape(p.y_label) + "</text>\n";
  if (empty) {
    out += "<text x=\"" + f(left + width / 2) + "\" y=\"" + f(top + height / 2) +
           "\" text-anchor=\"middle\" fill=\"#777\">not measured</text>\n";
  }
  double legend_y = top + 16;
  for (const Series& s : p.series) {
    std::string points;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) points += (points.empty() ? "" : " ") + f(px(s.x[i])) + "," + f(py(s.y[i]));
    if (points.empty()) continue;
    out += "<polyline class=\"series\" data-label=\"" + escape(s.label) + "\" fill=\"none\" stroke=\"" + s.color +
           "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
        out += "<circle cx=\"" + f(px(s.x[i])) + "\" cy=\"" + f(py(s.y[i])) + "\" r=\"3\" fill=\"" + s.color + "\"/>\n";
    // The legend sits in the top right corner of the plot, one line per series.
    out += "<line x1=\"" + f(left + width - 120) + "\" y1=\"" + f(legend_y) + "\" x2=\"" + f(left + width - 96) +
           "\" y2=\"" + f(legend_y) + "\" stroke=\"" + s.color + "\" stroke-width=\"2\"/>\n";
    out += "<text class=\"legend\" x=\"" + f(left + width - 90) + "\" y=\"" + f(legend_y) +
           "\" dy=\"0.35em\">" + escape(s.label) + "</text>\n";
    legend_y += 18;
  }
  out += "</g>\n";
}

}  // namespace detail

/// The SVG document: `title` above the panels, which sit side by side.
inline std::string chart(const std::string& title, const std::vector<Panel>& panels) {
  const double panel_width = 480, height = 420, margin_left = 80, margin_right = 20, margin_top = 70, margin_bottom = 60;
  const double total_width = panel_width * static_cast<double>(panels.size());
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(total_width, 0) + "\" height=\"" +
         number(height, 0) + "\" viewBox=\"0 0 " + number(total_width, 0) + " " + number(height, 0) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<title>" + escape(title) + "</title>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text class=\"title\" x=\"" + number(total_width / 2, 2) +
         "\" y=\"24\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">" + escape(title) + "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i) {
    detail::panel(out, panels[i], panel_width * static_cast<double>(i) + margin_left, margin_top,
                  panel_width - margin_left - margin_right, height - margin_top - margin_bottom);
  }
  return out + "</svg>\n";
}

}  // namespace svg
