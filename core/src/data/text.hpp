// text.hpp - plain-text helpers of the data pipeline: UTF-8 validation and sentence segmentation.
// No LibTorch, no tokenizer: pure functions over std::string_view, safe to call from any thread.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bertx::data {

// Byte offset of the first invalid UTF-8 sequence in `s` (overlong forms, surrogates and code points
// above U+10FFFF are invalid), or std::string_view::npos when `s` is valid.
std::size_t find_invalid_utf8(std::string_view s);

// Strips ASCII whitespace (space, \t, \r, \n, \v, \f) at both ends.
std::string_view trim(std::string_view s);

// Splits running text into sentences (views into `text`, trimmed, never empty), appended to `out`.
// A sentence ends at '.', '!' or '?' (and runs like "?!" or "..."), optionally followed by closing
// quotes/brackets, when whitespace and a sentence start (capital letter, digit, opening quote or bracket)
// follow. Not an end: abbreviations (Dr., Mr., e.g., i.e., vs., No. 5 ...), initials (J. R. R. Tolkien),
// decimals (3.14), and a lower-case continuation. Dotted acronyms that can end a sentence (U.S., Inc.,
// etc.) end one only when a common sentence-opening word follows ("... in the U.S. The next ...").
void split_sentences(std::string_view text, std::vector<std::string_view>& out);
inline std::vector<std::string_view> split_sentences(std::string_view text) {
  std::vector<std::string_view> out;
  split_sentences(text, out);
  return out;
}

}  // namespace bertx::data
