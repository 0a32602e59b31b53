// history/svg.hpp - metric curves as a standalone SVG (`bertx runs plot`): one <path> per series (steps on
// x, values on y, NaN values break the line), axes as <line>s, "nice" tick values (1, 2, 5 x 10^k) with
// labels, axis labels and a legend. No dependencies; the text is XML that any SVG viewer or converter reads.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace bertx::history {

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct PlotOptions {
  std::string title, x_label = "step", y_label;
  int width = 800, height = 480;
  bool log_y = false;  // log10 y axis; points with y <= 0 are left out
};

// About `target` round tick values (step 1, 2 or 5 x 10^k), from the one at or below lo to the one at or
// above hi (lo == hi widens the range by one unit).
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// Throws bertx::Error when there is no series or no finite point at all.
std::string svg_plot(const std::vector<Series>& series, const PlotOptions& options);

}  // namespace bertx::history
