// history/format.cpp - see format.hpp.
#include "history/format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "bertx/error.hpp"

namespace bertx::history {

Format parse_format(const std::string& name, const std::string& flag) {
  if (name == "text") return Format::Text;
  if (name == "markdown" || name == "md") return Format::Markdown;
  if (name == "csv") return Format::Csv;
  if (name == "json") return Format::Json;
  throw Error(flag + " '" + name + "': expected text, markdown, csv or json");
}

std::string fixed(std::optional<double> v, int precision, const std::string& missing) {
  if (!v) return missing;
  if (std::isnan(*v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, *v);
  return buf;
}

std::string shortest(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
  return out + "\n";
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) switch (c) {
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
  return out;
}

std::string local_time(double t) {
  if (t <= 0) return "-";
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string text_grid(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.resize(c + 1, 0);
      width[c] = std::max(width[c], r[c].size());
    }
  std::size_t total = 0;
  for (std::size_t w : width) total += w;
  total += width.empty() ? 0 : 2 * (width.size() - 1);
  std::string out;
  for (const auto& r : rows) {
    if (r.empty()) {
      out += std::string(total, '-') + "\n";
      continue;
    }
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - r[c].size(), ' ');
      if (c) line += "  ";
      line += (c < right.size() && right[c]) ? pad + r[c] : r[c] + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string markdown_grid(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].empty()) continue;
    out += "|";
    for (const auto& cell : rows[i]) out += " " + cell + " |";
    out += "\n";
    if (i == 0) {
      out += "|";
      for (std::size_t c = 0; c < rows[0].size(); ++c) out += (c < right.size() && right[c]) ? "---:|" : "---|";
      out += "\n";
    }
  }
  return out;
}

}  // namespace bertx::history
