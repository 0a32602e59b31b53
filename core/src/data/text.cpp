// text.cpp - UTF-8 validation and a rule-based sentence splitter (abbreviations, initials, decimals, quotes).
// The splitter replaces NLTK's Punkt in NVIDIA's recipe: rules over a fixed abbreviation list, no model.
#include "data/text.hpp"

#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace bertx::data {

std::size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, cp = c & 0x07;
    else
      return i;
    if (i + len > n) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

namespace {

// Decodes the code point at s[i] (valid or not: an invalid byte decodes as itself, length 1).
std::uint32_t decode(std::string_view s, std::size_t i, std::size_t& len) {
  const auto c = static_cast<unsigned char>(s[i]);
  len = 1;
  if (c < 0x80) return c;
  std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (need == 1 || i + need > s.size()) return c;
  std::uint32_t cp = c & (0x7F >> need);
  for (std::size_t k = 1; k < need; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  len = need;
  return cp;
}

bool is_terminator(std::uint32_t cp) { return cp == '.' || cp == '!' || cp == '?' || cp == 0x2026; }
bool is_cjk_terminator(std::uint32_t cp) { return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F; }
bool is_closing(std::uint32_t cp) {
  return cp == '"' || cp == '\'' || cp == ')' || cp == ']' || cp == '}' || cp == 0xBB || cp == 0x201D || cp == 0x2019 ||
         cp == 0x300D || cp == 0x300F || cp == 0xFF09;
}
bool is_opening(std::uint32_t cp) {
  return cp == '"' || cp == '\'' || cp == '(' || cp == '[' || cp == '{' || cp == 0xAB || cp == 0x201C || cp == 0x2018 ||
         cp == 0x300C || cp == 0x300E || cp == 0xFF08;
}
// Could this letter open a sentence? ASCII capitals and digits; for other scripts an upper-case or
// caseless letter (lower-case Latin-1/Latin Extended-A, Greek and Cyrillic letters are not).
bool is_sentence_initial(std::uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
  if (cp >= 0xC0 && cp <= 0xDE) return cp != 0xD7;
  if (cp >= 0xDF && cp <= 0xFF) return false;
  if (cp >= 0x100 && cp <= 0x17F) return cp % 2 == 0;
  if (cp >= 0x391 && cp <= 0x3A9) return true;
  if (cp >= 0x3AC && cp <= 0x3CE) return false;
  if (cp >= 0x400 && cp <= 0x42F) return true;
  if (cp >= 0x430 && cp <= 0x45F) return false;
  return cp >= 0x370;  // other letters (CJK, ...) have no case
}

bool in(std::string_view w, std::initializer_list<std::string_view> set) {
  for (auto s : set)
    if (s == w) return true;
  return false;
}

// Abbreviations followed by a name or a noun: never the end of a sentence.
bool never_final(std::string_view w) {
  return in(w, {"Mr",  "Mrs",  "Ms",   "Mssrs", "Messrs", "Dr",  "Drs", "Prof",  "Gen",  "Col",    "Lt",   "Capt",
                "Sgt", "Cpl",  "Maj",  "Adm",   "Cmdr",   "Rev", "Hon", "Gov",   "Sen",  "Rep",    "Pres", "Supt",
                "Fr",  "Msgr", "Mme",  "Mlle",  "vs",     "v",   "cf",  "viz",   "al",   "approx", "ca",   "c",
                "est", "Dept", "dept", "Univ",  "Jan",    "Feb", "Apr", "Jun",   "Jul",  "Aug",    "Sep",  "Sept",
                "Oct", "Nov",  "Dec",  "ed",    "eds",    "Ed",  "Eds", "trans", "incl", "Mt",     "Ft"});
}
// Abbreviations before a number ("No. 5", "pp. 12-15"): the end only when no digit follows.
bool before_number(std::string_view w) {
  return in(w, {"No", "no", "Nos", "nos", "Vol", "vol", "Vols", "vols", "pp",  "p",   "Fig", "fig", "Figs", "figs",
                "Eq", "eq", "Ch",  "ch",  "Art", "art", "Sec",  "sec",  "Ref", "ref", "Nr",  "nr",  "Op",   "op"});
}
// Abbreviations that often end a sentence: the end when a common sentence opener follows.
bool may_be_final(std::string_view w) {
  return in(w, {"etc", "Inc", "Ltd",  "Co", "Corp", "Jr",  "Sr",  "St",  "Bros", "Esq",
                "Ave", "Rd",  "Blvd", "Av", "Plc",  "LLC", "a.m", "p.m", "A.M",  "P.M"});
}
bool is_opener_word(std::string_view w) {
  return in(w,
            {"The",     "A",     "An",     "In",    "On",    "At",       "It",       "He",    "She",    "They",  "We",
             "I",       "This",  "That",   "These", "Those", "There",    "His",      "Her",   "Its",    "Their", "But",
             "However", "After", "Before", "As",    "When",  "While",    "Although", "Since", "During", "For",   "If",
             "Some",    "Many",  "Most",   "One",   "Both",  "Other",    "Such",     "Then",  "Thus",   "Also",  "By",
             "From",    "With",  "To",     "Our",   "My",    "You",      "Your",     "What",  "Who",    "Why",   "How",
             "Where",   "Each",  "Its",    "Today", "Later", "Following"});
}

// The word that follows position k (letters and digits only), for opener checks.
std::string_view word_at(std::string_view s, std::size_t k) {
  std::size_t e = k;
  while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])))) ++e;
  return s.substr(k, e - k);
}

// Is the '.' at `dot` (followed by whitespace and a sentence start at `next`) part of an abbreviation?
bool abbreviation_before(std::string_view s, std::size_t begin, std::size_t dot, std::size_t next) {
  std::size_t b = dot;
  while (b > begin && !is_space(s[b - 1])) --b;
  std::string_view w = s.substr(b, dot - b);
  while (!w.empty()) {  // leading opening quotes/brackets: "(e.g." -> "e.g"
    std::size_t len;
    if (!is_opening(decode(w, 0, len))) break;
    w.remove_prefix(len);
  }
  if (w.empty()) return false;
  const bool next_digit = std::isdigit(static_cast<unsigned char>(s[next])) != 0;
  if (w.size() == 1 && std::isalpha(static_cast<unsigned char>(w[0]))) return true;  // initial: "J. Smith"
  if (never_final(w)) return true;
  if (before_number(w)) return next_digit;
  if (may_be_final(w)) return !is_opener_word(word_at(s, next));
  if (w.find('.') != std::string_view::npos) {
    // Dotted abbreviation: "e.g", "i.e" (lower case: never final), "U.S", "U.K", "Ph.D" (may be final).
    bool letters_and_dots = true, upper = false;
    for (char c : w) {
      if (c == '.') continue;
      if (!std::isalpha(static_cast<unsigned char>(c))) letters_and_dots = false;
      if (std::isupper(static_cast<unsigned char>(c))) upper = true;
    }
    if (!letters_and_dots) return false;
    return upper ? !is_opener_word(word_at(s, next)) : true;
  }
  return false;
}

}  // namespace

void split_sentences(std::string_view text, std::vector<std::string_view>& out) {
  const std::size_t n = text.size();
  std::size_t start = 0, i = 0;
  auto emit = [&](std::size_t end) {
    std::string_view s = trim(text.substr(start, end - start));
    if (!s.empty()) out.push_back(s);
  };
  while (i < n) {
    std::size_t len;
    std::uint32_t cp = decode(text, i, len);
    const bool cjk = is_cjk_terminator(cp);
    if (!is_terminator(cp) && !cjk) {
      i += len;
      continue;
    }
    const std::size_t term = i;
    std::size_t j = i + len, dots = (cp == '.');
    int run = 1;
    while (j < n) {  // "?!", "...", "。」"
      std::uint32_t c2 = decode(text, j, len);
      if (!is_terminator(c2) && !is_cjk_terminator(c2)) break;
      dots += (c2 == '.'), ++run, j += len;
    }
    while (j < n) {
      std::uint32_t c2 = decode(text, j, len);
      if (!is_closing(c2)) break;
      j += len;
    }
    if (cjk) {  // CJK full stops end a sentence without a following space
      emit(j);
      start = i = j;
      continue;
    }
    if (j >= n) break;
    if (!is_space(text[j])) {  // "3.14", "example.com", "end.The": not a boundary
      i = j;
      continue;
    }
    std::size_t k = j;
    while (k < n && is_space(text[k])) ++k;
    if (k >= n) break;
    std::uint32_t first = decode(text, k, len);
    bool starts = is_sentence_initial(first);
    if (!starts && is_opening(first) && k + len < n) {
      std::size_t len2;
      starts = is_sentence_initial(decode(text, k + len, len2));
    }
    if (!starts) {
      i = k;
      continue;
    }
    if (run == 1 && dots == 1 && abbreviation_before(text, start, term, k)) {
      i = k;
      continue;
    }
    emit(j);
    start = i = k;
  }
  emit(n);
}

}  // namespace bertx::data
