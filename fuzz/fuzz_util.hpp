// fuzz_util.hpp - what every libFuzzer target shares: a private temp folder for parsers that only take a
// path (the input is written there before each call), splitting one input into several files, and the
// rule that a parser may reject bad input only with bertx::Error (any other exception escapes, and
// libFuzzer reports it as a crash: "bad input gets a clear one-line error" is part of what is fuzzed).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "bertx/error.hpp"

namespace bertx::fuzz {

// One folder per process under $TMPDIR (libFuzzer's -jobs/-fork run several), removed at exit.
inline const std::filesystem::path& temp_dir() {
  static const std::filesystem::path dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/bertx-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("bertx fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(temp_dir(), ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

// Writes bytes to <temp_dir>/<name> (truncating) and returns the path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  const std::filesystem::path p = temp_dir() / name;
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f || (bytes.size() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) || std::fclose(f) != 0) {
    std::perror(p.c_str());
    std::abort();
  }
  return p.string();
}

// Splits an input at lines equal to `marker` (e.g. "#---"): part 0 is the text before the first marker.
inline std::vector<std::string_view> split_parts(std::string_view data, std::string_view marker,
                                                 std::size_t max_parts) {
  std::vector<std::string_view> parts;
  std::size_t start = 0, line = 0;
  while (line <= data.size() && parts.size() + 1 < max_parts) {
    std::size_t end = data.find('\n', line);
    if (end == std::string_view::npos) break;
    if (data.substr(line, end - line) == marker) {
      parts.push_back(data.substr(start, line - start));
      start = end + 1;
    }
    line = end + 1;
  }
  parts.push_back(data.substr(start));
  return parts;
}

// Runs f(); a bertx::Error (the documented rejection) is swallowed after checking that its message is not
// empty. Anything else propagates.
template <class F>
void expect_ok_or_error(F&& f) {
  try {
    f();
  } catch (const bertx::Error& e) {
    const std::string_view m = e.what();
    if (m.empty()) {
      std::fprintf(stderr, "bertx fuzz: empty error message\n");
      std::abort();
    }
  }
}

}  // namespace bertx::fuzz
