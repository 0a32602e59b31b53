// wikitext.cpp - a WikiExtractor-like cleaner: nested templates/tables, links, references, comments, tags,
// headings, lists, quotes and entities. Each stage is one linear scan over the text.
#include "data/wikitext.hpp"

#include <cctype>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "data/text.hpp"

namespace bertx::data {

namespace {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

struct NamedEntity {
  const char* name;
  std::uint32_t cp;  // 0x20 for the space-like ones
};
constexpr NamedEntity kEntities[] = {
    {"amp", '&'},      {"lt", '<'},        {"gt", '>'},       {"quot", '"'},     {"apos", '\''},     {"nbsp", ' '},
    {"ensp", ' '},     {"emsp", ' '},      {"thinsp", ' '},   {"hairsp", ' '},   {"ndash", 0x2013},  {"mdash", 0x2014},
    {"minus", 0x2212}, {"hellip", 0x2026}, {"lsquo", 0x2018}, {"rsquo", 0x2019}, {"ldquo", 0x201C},  {"rdquo", 0x201D},
    {"laquo", 0xAB},   {"raquo", 0xBB},    {"times", 0xD7},   {"divide", 0xF7},  {"deg", 0xB0},      {"plusmn", 0xB1},
    {"middot", 0xB7},  {"bull", 0x2022},   {"copy", 0xA9},    {"reg", 0xAE},     {"trade", 0x2122},  {"euro", 0x20AC},
    {"pound", 0xA3},   {"yen", 0xA5},      {"cent", 0xA2},    {"sect", 0xA7},    {"para", 0xB6},     {"frac12", 0xBD},
    {"frac14", 0xBC},  {"frac34", 0xBE},   {"sup2", 0xB2},    {"sup3", 0xB3},    {"micro", 0xB5},    {"prime", 0x2032},
    {"Prime", 0x2033}, {"larr", 0x2190},   {"rarr", 0x2192},  {"harr", 0x2194},  {"dagger", 0x2020}, {"Dagger", 0x2021},
    {"eacute", 0xE9},  {"Eacute", 0xC9},   {"egrave", 0xE8},  {"aacute", 0xE1},  {"agrave", 0xE0},   {"oacute", 0xF3},
    {"uacute", 0xFA},  {"iacute", 0xED},   {"ouml", 0xF6},    {"uuml", 0xFC},    {"auml", 0xE4},     {"Ouml", 0xD6},
    {"Uuml", 0xDC},    {"Auml", 0xC4},     {"szlig", 0xDF},   {"ntilde", 0xF1},  {"ccedil", 0xE7},   {"alpha", 0x3B1},
    {"beta", 0x3B2},   {"gamma", 0x3B3},   {"delta", 0x3B4},  {"pi", 0x3C0},     {"mu", 0x3BC},      {"sigma", 0x3C3},
    {"lambda", 0x3BB}, {"omega", 0x3C9},   {"le", 0x2264},    {"ge", 0x2265},    {"ne", 0x2260},     {"asymp", 0x2248},
    {"infin", 0x221E}, {"shy", 0},         {"zwj", 0},        {"zwnj", 0},       {"lrm", 0},         {"rlm", 0},
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Case-insensitive find of an ASCII needle (lower case) from `from`.
std::size_t find_ci(std::string_view s, std::string_view needle, std::size_t from) {
  if (needle.size() > s.size()) return std::string_view::npos;
  for (std::size_t i = from; i + needle.size() <= s.size(); ++i) {
    std::size_t k = 0;
    while (k < needle.size() && lower(s[i + k]) == needle[k]) ++k;
    if (k == needle.size()) return i;
  }
  return std::string_view::npos;
}

std::string strip_comments(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t b = s.find("<!--", i);
    if (b == std::string_view::npos) break;
    out.append(s.substr(i, b - i));
    std::size_t e = s.find("-->", b + 4);
    i = e == std::string_view::npos ? s.size() : e + 3;
  }
  if (i < s.size()) out.append(s.substr(i));
  return out;
}

// Tags whose whole content is dropped.
bool drop_with_content(std::string_view name) {
  static constexpr const char* names[] = {
      "ref",      "references", "math",         "gallery",     "timeline", "syntaxhighlight", "source",
      "pre",      "score",      "imagemap",     "chem",        "ce",       "hiero",           "graph",
      "mapframe", "maplink",    "templatedata", "includeonly", "table",    "inputbox",        "categorytree"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

// Parses a tag at s[i] == '<': name (lower case), closing?, self-closing?, end (one past '>').
bool parse_tag(std::string_view s, std::size_t i, std::string& name, bool& closing, bool& self_closing,
               std::size_t& end) {
  std::size_t j = i + 1;
  closing = j < s.size() && s[j] == '/';
  if (closing) ++j;
  if (j >= s.size() || !std::isalpha(static_cast<unsigned char>(s[j]))) return false;
  name.clear();
  while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-')) name += lower(s[j++]);
  if (j < s.size() && !(is_space(s[j]) || s[j] == '>' || s[j] == '/')) return false;
  std::size_t close = s.find('>', j);
  if (close == std::string_view::npos || close - i > 2000) return false;
  self_closing = close > 0 && s[close - 1] == '/';
  end = close + 1;
  return true;
}

std::string strip_blocks(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::string name;
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t lt = s.find('<', i);
    if (lt == std::string_view::npos) break;
    out.append(s.substr(i, lt - i));
    bool closing, self_closing;
    std::size_t end;
    if (!parse_tag(s, lt, name, closing, self_closing, end) || !drop_with_content(name)) {
      out += '<';
      i = lt + 1;
      continue;
    }
    i = end;
    if (closing || self_closing) continue;
    // Find the matching close tag "</name"; an unclosed block drops only its opening tag.
    const std::string close_tag = "</" + name;
    std::size_t c = find_ci(s, close_tag, end);
    while (c != std::string_view::npos) {
      std::size_t after = c + close_tag.size();
      if (after < s.size() && (s[after] == '>' || is_space(s[after]))) break;
      c = find_ci(s, close_tag, after);
    }
    if (c == std::string_view::npos) continue;
    std::size_t gt = s.find('>', c);
    i = gt == std::string_view::npos ? s.size() : gt + 1;
  }
  if (i < s.size()) out.append(s.substr(i));
  return out;
}

bool at_line_start(std::string_view s, std::size_t i) {
  while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) --i;
  return i == 0 || s[i - 1] == '\n';
}

// Removes {{templates}}, {{{parameters}}} and {| tables |}, nested in any order. An opener that is never
// closed is dropped by itself and the text after it is kept.
std::string strip_templates(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::vector<int> stack;  // 2 = "{{", 3 = "{{{", 1 = "{|"
  std::size_t outer_start = 0, outer_out = 0, outer_len = 0, i = 0;
  while (true) {
    if (i >= s.size()) {
      if (stack.empty()) break;
      // Unclosed: keep the text after the outermost opener.
      out.resize(outer_out);
      stack.clear();
      i = outer_start + outer_len;
      continue;
    }
    const char c = s[i];
    if (c == '{' && i + 1 < s.size() && s[i + 1] == '|' && at_line_start(s, i)) {
      if (stack.empty()) outer_start = i, outer_out = out.size(), outer_len = 2;
      stack.push_back(1);
      i += 2;
      continue;
    }
    if (c == '|' && i + 1 < s.size() && s[i + 1] == '}' && !stack.empty() && stack.back() == 1 && at_line_start(s, i)) {
      stack.pop_back();
      i += 2;
      continue;
    }
    if (c == '{' || c == '}') {
      std::size_t k = i;
      while (k < s.size() && s[k] == c) ++k;
      std::size_t run = k - i;
      if (run < 2) {
        if (stack.empty()) out += c;
        ++i;
        continue;
      }
      if (c == '{') {
        if (stack.empty()) outer_start = i, outer_out = out.size(), outer_len = run;
        // "{{" template, "{{{" parameter; longer runs nest, the parameter innermost ("{{{{{" = {{ {{{).
        while (run >= 2) {
          const int size = run == 3 ? 3 : 2;
          stack.push_back(size);
          run -= static_cast<std::size_t>(size);
        }
      } else {
        while (run >= 2 && !stack.empty()) {
          if (stack.back() == 1) {  // a table left open inside a template: close it with the template
            stack.pop_back();
            continue;
          }
          const auto size = static_cast<std::size_t>(stack.back());
          stack.pop_back();
          run = run >= size ? run - size : 0;
        }
        if (stack.empty())
          for (; run > 0; --run) out += '}';
      }
      i = k;
      continue;
    }
    if (stack.empty()) out += c;
    ++i;
  }
  return out;
}

bool is_language_prefix(std::string_view p) {
  if (p.size() < 2 || p.size() > 12) return false;
  for (char ch : p)
    if (!(std::islower(static_cast<unsigned char>(ch)) || ch == '-')) return false;
  if (p.size() > 3 && p.find('-') == std::string_view::npos && p != "simple") return false;
  static constexpr const char* sister[] = {"wikt", "commons", "meta", "species", "voy", "mw"};
  for (const char* x : sister)
    if (p == x) return false;
  return true;
}

std::string replace_links(std::string_view s);

// The visible text of the inside of [[...]]; empty for files, categories and interlanguage links.
std::string link_text(std::string_view inner) {
  inner = trim(inner);
  const bool visible = !inner.empty() && inner[0] == ':';  // [[:Category:X|x]] links to a category page
  if (visible) inner.remove_prefix(1);
  std::size_t colon = inner.find(':');
  std::size_t pipe = inner.find('|');
  // A pipe inside nested [[...]] does not split: find the first top-level pipe.
  {
    int depth = 0;
    pipe = std::string_view::npos;
    for (std::size_t i = 0; i + 1 <= inner.size(); ++i) {
      if (inner.compare(i, 2, "[[") == 0)
        ++depth, ++i;
      else if (inner.compare(i, 2, "]]") == 0)
        --depth, ++i;
      else if (inner[i] == '|' && depth == 0) {
        pipe = i;
        break;
      }
    }
  }
  if (!visible && colon != std::string_view::npos && (pipe == std::string_view::npos || colon < pipe)) {
    std::string prefix;
    for (char ch : trim(inner.substr(0, colon))) prefix += lower(ch);
    if (prefix == "file" || prefix == "image" || prefix == "category" || prefix == "media") return {};
    if (is_language_prefix(trim(inner.substr(0, colon))) && pipe == std::string_view::npos) return {};
  }
  if (pipe == std::string_view::npos) return std::string(inner);
  std::string_view text = trim(inner.substr(pipe + 1));
  if (text.empty()) {  // pipe trick: [[Paris (film)|]] -> "Paris"
    std::string_view target = inner.substr(0, pipe);
    if (colon != std::string_view::npos && colon < pipe) target.remove_prefix(colon + 1);
    std::size_t paren = target.find(" (");
    if (paren != std::string_view::npos) target = target.substr(0, paren);
    return std::string(trim(target));
  }
  return replace_links(text);
}

bool external_scheme(std::string_view s) {
  for (std::string_view p : {"http://", "https://", "ftp://", "//", "mailto:", "irc://", "news:"})
    if (s.substr(0, p.size()) == p) return true;
  return false;
}

std::string replace_links(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, 2, "[[") == 0) {
      int depth = 0;
      std::size_t j = i, end = std::string_view::npos;
      while (j + 1 < s.size()) {
        if (s.compare(j, 2, "[[") == 0)
          ++depth, j += 2;
        else if (s.compare(j, 2, "]]") == 0) {
          j += 2;
          if (--depth == 0) {
            end = j;
            break;
          }
        } else
          ++j;
      }
      if (end == std::string_view::npos) {  // unclosed: drop the brackets, keep the text
        i += 2;
        continue;
      }
      out += link_text(s.substr(i + 2, end - i - 4));
      i = end;
      continue;
    }
    if (s[i] == '[' && external_scheme(s.substr(i + 1))) {
      std::size_t close = s.find(']', i);
      std::size_t nl = s.find('\n', i);
      if (close != std::string_view::npos && (nl == std::string_view::npos || close < nl)) {
        std::string_view inner = s.substr(i + 1, close - i - 1);
        std::size_t sp = inner.find(' ');
        if (sp != std::string_view::npos) out.append(trim(inner.substr(sp + 1)));
        i = close + 1;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// Removes '' and ''' (runs of two or more apostrophes), __MAGIC_WORDS__ and remaining HTML tags.
void clean_line(std::string_view line, std::string& out) {
  std::string name;
  std::size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
      while (i < line.size() && line[i] == '\'') ++i;
      continue;
    }
    if (c == '_' && line.compare(i, 2, "__") == 0) {
      std::size_t j = i + 2;
      while (j < line.size() && std::isupper(static_cast<unsigned char>(line[j]))) ++j;
      if (j > i + 2 && line.compare(j, 2, "__") == 0) {
        i = j + 2;
        continue;
      }
    }
    if (c == '<') {
      bool closing, self_closing;
      std::size_t end;
      if (parse_tag(line, i, name, closing, self_closing, end)) {
        if (name == "br" || name == "hr" || name == "p" || name == "li") out += ' ';
        i = end;
        continue;
      }
    }
    out += c;
    ++i;
  }
}

std::string collapse(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
      continue;
    }
    // "( )", "()", "(, x" and "(; x" left behind by removed templates.
    if (c == '(') {
      std::size_t j = i + 1;
      while (j < s.size() && (is_space(s[j]) || s[j] == ',' || s[j] == ';')) ++j;
      if (j < s.size() && s[j] == ')') {
        i = j;
        if (!out.empty() && out.back() == ' ') out.pop_back();
        continue;
      }
      out += '(';
      i = j - 1;
      continue;
    }
    if ((c == ',' || c == '.' || c == ';' || c == ':') && !out.empty() && out.back() == ' ') out.pop_back();
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string decode_entities(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t amp = s.find('&', i);
    if (amp == std::string_view::npos) break;
    out.append(s.substr(i, amp - i));
    std::size_t semi = s.find(';', amp + 1);
    if (semi == std::string_view::npos || semi - amp > 12) {
      out += '&';
      i = amp + 1;
      continue;
    }
    std::string_view name = s.substr(amp + 1, semi - amp - 1);
    bool done = false;
    if (name.size() >= 2 && name[0] == '#') {
      std::uint32_t cp = 0;
      bool hex = name[1] == 'x' || name[1] == 'X';
      std::size_t k = hex ? 2 : 1;
      bool ok = k < name.size();
      for (; k < name.size() && ok; ++k) {
        const char d = name[k];
        int v = std::isdigit(static_cast<unsigned char>(d))           ? d - '0'
                : hex && std::isxdigit(static_cast<unsigned char>(d)) ? 10 + (lower(d) - 'a')
                                                                      : -1;
        if (v < 0 || cp > 0x10FFFF)
          ok = false;
        else
          cp = cp * (hex ? 16 : 10) + static_cast<std::uint32_t>(v);
      }
      if (ok && cp > 0 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
        if (cp == 0xA0) cp = ' ';
        append_utf8(out, cp);
        done = true;
      }
    } else {
      for (const auto& e : kEntities) {
        if (name == e.name) {
          if (e.cp) append_utf8(out, e.cp);
          done = true;
          break;
        }
      }
    }
    if (done)
      i = semi + 1;
    else
      out += '&', i = amp + 1;
  }
  if (i < s.size()) out.append(s.substr(i));
  return out;
}

std::string clean_wikitext(std::string_view wikitext) {
  std::string s = strip_comments(wikitext);
  s = strip_blocks(s);
  s = strip_templates(s);
  s = replace_links(s);
  std::string text;
  text.reserve(s.size());
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    std::string_view line = trim(std::string_view(s).substr(pos, nl - pos));
    pos = nl + 1;
    if (line.empty()) continue;
    const char c = line[0];
    if (c == '=' || c == '*' || c == '#' || c == ':' || c == ';' || c == '|' || c == '!' || c == '{' || c == '}')
      continue;
    if (line.substr(0, 4) == "----") continue;
    if (!text.empty()) text += ' ';
    clean_line(line, text);
  }
  return collapse(decode_entities(text));
}

}  // namespace bertx::data
