// history/format.hpp - output formats shared by the run history commands (runs table/compare/export):
// the --format names, numbers (fixed precision for people, shortest round trip for machines), CSV and
// XML escaping, local time stamps.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace bertx::history {

enum class Format { Text, Markdown, Csv, Json };
// Throws bertx::Error naming `flag` and the accepted names.
Format parse_format(const std::string& name, const std::string& flag = "--format");

// "%.<precision>f"; NaN -> "nan"; nullopt -> `missing`.
std::string fixed(std::optional<double> v, int precision, const std::string& missing = "-");
// Shortest text that reads back as the same double (std::to_chars); NaN -> "nan", +-inf -> "inf"/"-inf".
std::string shortest(double v);
// RFC 4180: quoted when it holds a comma, quote, CR or LF; quotes doubled.
std::string csv_field(const std::string& s);
std::string csv_line(const std::vector<std::string>& fields);
// &, <, >, " escaped for XML text and attribute values.
std::string xml_escape(const std::string& s);
// "2026-12-01 10:00:00" (local time); "-" for t <= 0.
std::string local_time(double unix_seconds);

// Columns padded to their widest cell; columns listed in `right` are right-aligned.
// A row that is empty prints as a dashed rule across the table.
std::string text_grid(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right);
// A GitHub-flavoured Markdown table: rows[0] is the header; `right` columns get "---:".
std::string markdown_grid(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right);

}  // namespace bertx::history
