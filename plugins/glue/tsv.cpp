// tsv.cpp - tab-only splitting with row-width checks; errors name path:line.
#include "tsv.hpp"

#include "bertx/error.hpp"

namespace bertx::glue {

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
}

TsvFile::TsvFile(std::string path, bool header, std::size_t columns)
    : path_(std::move(path)), in_(path_, std::ios::binary), columns_(columns) {
  if (!in_) throw Error(path_ + ": cannot open (missing or unreadable)");
  if (header) {
    if (!read_line()) throw Error(path_ + ": empty file, expected a header line");
    for (std::string_view f : split_tabs(buffer_)) header_.emplace_back(f);
    columns_ = header_.size();
  } else if (columns_ == 0) {
    throw Error(path_ + ": a headerless TSV needs its column count (caller bug)");
  }
}

bool TsvFile::read_line() {
  if (!std::getline(in_, buffer_)) return false;
  ++line_;
  if (line_ == 1 && buffer_.compare(0, 3, "\xEF\xBB\xBF") == 0) buffer_.erase(0, 3);  // UTF-8 BOM
  if (!buffer_.empty() && buffer_.back() == '\r') buffer_.pop_back();
  return true;
}

bool TsvFile::next(std::vector<std::string_view>& fields) {
  if (!read_line()) return false;
  fields = split_tabs(buffer_);
  if (fields.size() != columns_)
    throw Error(where() + ": " + std::to_string(fields.size()) + " tab-separated columns, expected " +
                std::to_string(columns_) + (header_.empty() ? std::string() : " (as the header)") +
                " - GLUE files split on tabs only; a quote is an ordinary character");
  return true;
}

bool TsvFile::has_column(const std::string& name) const {
  for (const auto& h : header_)
    if (h == name) return true;
  return false;
}

std::size_t TsvFile::column(const std::string& name) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name) return i;
  std::string all;
  for (const auto& h : header_) all += (all.empty() ? "'" : ", '") + h + "'";
  throw Error(path_ + ":1: no column '" + name + "' in the header (columns: " + all + ")");
}

}  // namespace bertx::glue
