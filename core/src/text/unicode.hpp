// unicode.hpp - the character classes and UTF-8 steps of the WordPiece port (tokenizer.cpp): Python's str.isspace,
// BasicTokenizer's CJK / punctuation / control tests, the case rules of str.lower() (final sigma), strict UTF-8
// decoding as decode("utf-8", "ignore"). Inline, in a header: the tokenizer's per-character loop inlines them.
#pragma once
#include <utf8proc.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace bertx::unicode {

// ---- character classes ------------------------------------------------------------------------------
enum : std::uint8_t { kKeep = 0, kDrop = 1, kSpace = 2, kPunct = 3 };

// ASCII: NUL and other controls (Cc) are dropped; space, \t, \n, \r are whitespace (\v, \f, 0x1c-0x1f
// are Cc, so _clean_text drops them before whitespace_tokenize could split on them).
inline constexpr std::array<std::uint8_t, 128> kAscii = [] {
  std::array<std::uint8_t, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      t[c] = kSpace;
    else if (c < 0x20 || c == 0x7f)
      t[c] = kDrop;
    else if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
      t[c] = kPunct;
  }
  return t;
}();

inline constexpr std::array<char, 128> kLower = [] {
  std::array<char, 128> t{};
  for (int c = 0; c < 128; ++c) t[c] = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return t;
}();

// Python's str.isspace() (what str.split() and str.strip() use).
inline bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// BasicTokenizer._is_chinese_char.
inline bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

inline int category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

inline bool is_punct(char32_t c) {
  if (c < 128) return kAscii[c] == kPunct;
  const int cat = category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// Unicode Case_Ignorable: Mn, Me, Cf, Lm, Sk or Word_Break MidLetter / MidNumLet / Single_Quote.
inline bool case_ignorable(char32_t c) {
  switch (c) {
    case 0x27:
    case 0x2e:
    case 0x3a:
    case 0xb7:
    case 0x387:
    case 0x55f:
    case 0x5f4:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xfe13:
    case 0xfe52:
    case 0xfe55:
    case 0xff07:
    case 0xff0e:
    case 0xff1a:
      return true;
    default:
      break;
  }
  const int cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

// Unicode Cased, for characters that are not case-ignorable (the only ones the final-sigma rule asks
// about): Lu, Ll, Lt and the Other_Lowercase / Other_Uppercase letters that are not Lm.
inline bool cased(char32_t c) {
  const int cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT || c == 0xaa ||
         c == 0xba || (c >= 0x2160 && c <= 0x217f) || (c >= 0x24b6 && c <= 0x24e9) || (c >= 0x1f130 && c <= 0x1f149) ||
         (c >= 0x1f150 && c <= 0x1f169) || (c >= 0x1f170 && c <= 0x1f189);
}

// Python's handle_capital_sigma: U+03A3 at i lower-cases to final sigma after a cased letter (skipping
// case-ignorables) unless a cased letter follows (again skipping case-ignorables).
inline bool final_sigma(const char32_t* s, std::size_t n, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && case_ignorable(s[j - 1])) --j;
  if (j == 0 || !cased(s[j - 1])) return false;
  for (j = i + 1; j < n && case_ignorable(s[j]); ++j) {
  }
  return j == n || !cased(s[j]);
}

// Strict UTF-8 decoding at p (advanced past the character); -1 for an invalid byte (p advanced by one):
// invalid bytes are dropped, as convert_to_unicode's decode("utf-8", "ignore") does.
inline std::int32_t decode(const unsigned char*& p, const unsigned char* e) {
  const unsigned c = *p;
  int n;
  std::uint32_t cp, min;
  if (c < 0x80) {
    ++p;
    return static_cast<std::int32_t>(c);
  }
  if (c >= 0xc2 && c <= 0xdf) {
    n = 1;
    cp = c & 0x1f;
    min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 2;
    cp = c & 0x0f;
    min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 3;
    cp = c & 0x07;
    min = 0x10000;
  } else {
    ++p;
    return -1;
  }
  if (e - p < n + 1) {
    ++p;
    return -1;
  }
  for (int k = 1; k <= n; ++k) {
    if ((p[k] & 0xc0) != 0x80) {
      ++p;
      return -1;
    }
    cp = (cp << 6) | (p[k] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    ++p;
    return -1;
  }
  p += n + 1;
  return static_cast<std::int32_t>(cp);
}

inline void append_utf8(std::string& s, char32_t c) {
  char b[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), reinterpret_cast<utf8proc_uint8_t*>(b));
  s.append(b, static_cast<std::size_t>(n));
}

}  // namespace bertx::unicode
