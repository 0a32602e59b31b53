// history/svg.cpp - see svg.hpp. Layout: a fixed margin around the plot area; the legend sits in the top
// right corner inside the plot area on a translucent white box.
#include "history/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "bertx/error.hpp"
#include "history/format.hpp"

namespace bertx::history {

namespace {

// matplotlib's "tab10" palette: distinguishable, colour-blind friendlier than pure hues.
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string num(double v, const char* fmt = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string tick_label(double v, bool log_axis) {
  if (log_axis) v = std::pow(10.0, v);
  if (std::fabs(v) < 1e-12) v = 0;  // -0 and rounding noise
  return num(v, "%g");
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) {
    lo -= 1;
    hi += 1;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag * (1 + 1e-9)) {
      step = m * mag;
      break;
    }
  // From the multiple of step at or below lo to the one at or above hi: the axis spans whole ticks.
  const auto k0 = static_cast<long long>(std::floor(lo / step + 1e-9)),
             k1 = static_cast<long long>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (long long k = k0; k <= k1; ++k) ticks.push_back(static_cast<double>(k) * step);
  return ticks;
}

std::string svg_plot(const std::vector<Series>& series, const PlotOptions& o) {
  if (series.empty()) throw Error("plot: no series to draw");
  auto ty = [&](double y) { return o.log_y ? (y > 0 ? std::log10(y) : std::numeric_limits<double>::quiet_NaN()) : y; };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      const double v = ty(y);
      if (!std::isfinite(x) || !std::isfinite(v)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, v), y1 = std::max(y1, v);
    }
  if (!std::isfinite(x0)) throw Error("plot: the series have no finite values to draw");
  const auto xt = nice_ticks(x0, x1), yt = nice_ticks(y0, y1);
  x0 = xt.front(), x1 = xt.back(), y0 = yt.front(), y1 = yt.back();

  const double left = 80, right = 20, top = o.title.empty() ? 20 : 40, bottom = 60;
  const double pw = o.width - left - right, ph = o.height - top - bottom;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };

  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) + "\" height=\"" +
       std::to_string(o.height) + "\" viewBox=\"0 0 " + std::to_string(o.width) + " " + std::to_string(o.height) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!o.title.empty())
    s += "<text class=\"title\" x=\"" + num(left + pw / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" +
         xml_escape(o.title) + "</text>\n";
  s += "<g class=\"grid\" stroke=\"#e5e5e5\">\n";
  for (double t : xt)
    s += "<line x1=\"" + num(px(t)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(px(t)) + "\" y2=\"" + num(top + ph) +
         "\"/>\n";
  for (double t : yt)
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(t)) + "\" x2=\"" + num(left + pw) + "\" y2=\"" + num(py(t)) +
         "\"/>\n";
  s += "</g>\n<g class=\"axes\" stroke=\"black\">\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(left + pw) + "\" y2=\"" +
       num(top + ph) + "\"/>\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" + num(top + ph) +
       "\"/>\n";
  for (double t : xt)
    s += "<line x1=\"" + num(px(t)) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(px(t)) + "\" y2=\"" +
         num(top + ph + 5) + "\"/>\n";
  for (double t : yt)
    s += "<line x1=\"" + num(left - 5) + "\" y1=\"" + num(py(t)) + "\" x2=\"" + num(left) + "\" y2=\"" + num(py(t)) +
         "\"/>\n";
  s += "</g>\n<g class=\"ticks\">\n";
  for (double t : xt)
    s += "<text x=\"" + num(px(t)) + "\" y=\"" + num(top + ph + 18) + "\" text-anchor=\"middle\">" +
         tick_label(t, false) + "</text>\n";
  for (double t : yt)
    s += "<text x=\"" + num(left - 8) + "\" y=\"" + num(py(t) + 4) + "\" text-anchor=\"end\">" +
         tick_label(t, o.log_y) + "</text>\n";
  s += "</g>\n";
  s += "<text class=\"xlabel\" x=\"" + num(left + pw / 2) + "\" y=\"" + num(o.height - 15.0) +
       "\" text-anchor=\"middle\">" + xml_escape(o.x_label) + "</text>\n";
  s += "<text class=\"ylabel\" x=\"18\" y=\"" + num(top + ph / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + num(top + ph / 2) + ")\">" +
       xml_escape(o.y_label + (o.log_y ? " (log scale)" : "")) + "</text>\n";

  s += "<g class=\"series\" fill=\"none\" stroke-width=\"1.5\" stroke-linejoin=\"round\">\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    std::string d;
    bool pen_down = false;
    for (const auto& [x, y] : series[i].points) {
      const double v = ty(y);
      if (!std::isfinite(x) || !std::isfinite(v)) {
        pen_down = false;  // a gap
        continue;
      }
      d += (d.empty() ? "" : " ") + std::string(pen_down ? "L" : "M") + num(px(x)) + " " + num(py(v));
      pen_down = true;
    }
    if (d.empty()) d = "M" + num(left) + " " + num(top + ph);  // nothing drawable: still one (empty) path per series
    s += "<path stroke=\"" + std::string(kColours[i % 10]) + "\" d=\"" + d + "\"><title>" +
         xml_escape(series[i].label) + "</title></path>\n";
  }
  s += "</g>\n";

  std::size_t longest = 0;
  for (const auto& se : series) longest = std::max(longest, se.label.size());
  const double lw = 40 + 7.0 * static_cast<double>(longest), lh = 8 + 18.0 * static_cast<double>(series.size());
  const double lx = left + pw - lw - 10, ly = top + 10;
  s += "<g class=\"legend\">\n<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"" + num(lw) + "\" height=\"" +
       num(lh) + "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999\"/>\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const double yy = ly + 16 + 18.0 * static_cast<double>(i);
    s += "<line x1=\"" + num(lx + 8) + "\" y1=\"" + num(yy - 4) + "\" x2=\"" + num(lx + 30) + "\" y2=\"" + num(yy - 4) +
         "\" stroke=\"" + kColours[i % 10] + "\" stroke-width=\"2\"/>\n";
    s += "<text x=\"" + num(lx + 36) + "\" y=\"" + num(yy) + "\">" + xml_escape(series[i].label) + "</text>\n";
  }
  s += "</g>\n</svg>\n";
  return s;
}

}  // namespace bertx::history
