// tsv.hpp - GLUE's TSV files read exactly as the official GLUE loaders read them (Google's run_classifier.py
// and Hugging Face's processors: csv.reader(delimiter="\t", quotechar=None)): a line is split on tabs only
// and quote characters are ordinary text. MNLI and QQP sentences contain unbalanced quotes, so a reader
// that honoured CSV quoting would glue lines together or drop characters. A UTF-8 byte-order mark on the
// first line and a trailing '\r' (CRLF files) are removed, as Python's utf-8-sig text mode does.
// Pure C++ (no LibTorch): the reader plugin, the task plugin and the tests share it.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace bertx::glue {

class TsvFile {
 public:
  // Opens `path`. header = true: the first line names the columns and every row must have as many;
  // header = false: every row must have `columns` fields. Throws bertx::Error naming the file.
  TsvFile(std::string path, bool header, std::size_t columns = 0);

  // The next row, split on tabs (views into a buffer valid until the next call); false at the end.
  // Throws bertx::Error "path:line: N columns, expected M ..." for a row with the wrong column count.
  bool next(std::vector<std::string_view>& fields);

  const std::vector<std::string>& header() const { return header_; }
  std::size_t columns() const { return columns_; }
  bool has_column(const std::string& name) const;
  // Index of a header column; throws "path:1: no column 'name' (columns: ...)".
  std::size_t column(const std::string& name) const;
  std::int64_t line() const { return line_; }  // 1-based line number of the row last returned
  std::string where() const { return path_ + ":" + std::to_string(line_); }
  const std::string& path() const { return path_; }

 private:
  bool read_line();
  std::string path_;
  std::ifstream in_;
  std::string buffer_;
  std::vector<std::string> header_;
  std::size_t columns_ = 0;
  std::int64_t line_ = 0;
};

// Splits one line on '\t' (no quoting): "a\t\"b\"" -> {a, "b"}. An empty line is one empty field.
std::vector<std::string_view> split_tabs(std::string_view line);

}  // namespace bertx::glue
