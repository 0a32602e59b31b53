// tokenizer.cpp - WordPiece tokenization, a port of google-research/bert tokenization.py (FullTokenizer =
// BasicTokenizer + WordpieceTokenizer, commit eedf5716) that gives the same ids on every input.
// Why a port: pre-trained checkpoints were made with that code and its details decide the ids: Python
// str.lower() (full mapping U+0130 -> "i\u0307", final sigma), NFD then drop Mn, split on Python's
// whitespace (so U+2028/U+2029 split, though _is_whitespace says no), words over 200 chars -> [UNK].
// Unicode tables: libutf8proc (Unicode 15; the reference ran with Python's unicodedata 14.0).
// Speed: one pass over the bytes with an ASCII fast path, thread_local scratch buffers (no allocation per
// character or word once warm), string_view vocab lookups; "##" of a continuation is written in place over
// the already consumed bytes in front of it, so a lookup never copies.
#include "bertx/tokenizer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "text/unicode.hpp"

namespace bertx {
namespace {

using namespace unicode;  // character classes, UTF-8 (unicode.hpp)

// Per-thread buffers. Words live at offset 2 of `word` / `norm`, so the two bytes in front of a word are
// always writable ("##" of a continuation piece).
struct Scratch {
  std::string word, norm;
  std::vector<char32_t> cps, low, nfd;
};
// Not inlined: GCC would otherwise recompute the thread_local's address (__tls_get_addr) at every use.
[[gnu::noinline]] Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Lower-cases (Python str.lower()), NFD-decomposes and drops Mn: BasicTokenizer's lower + _run_strip_accents
// for a whitespace token with non-ASCII characters (ASCII ones are already lower-cased). Result in s.norm.
void lower_strip_accents(Scratch& s) {
  s.cps.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.word.data()) + 2;
  const auto* e = reinterpret_cast<const unsigned char*>(s.word.data() + s.word.size());
  while (p < e) s.cps.push_back(static_cast<char32_t>(decode(p, e)));  // valid: built from decoded chars
  s.low.clear();
  for (std::size_t i = 0; i < s.cps.size(); ++i) {
    const char32_t c = s.cps[i];
    if (c < 0x80)
      s.low.push_back(c);
    else if (c == 0x130) {
      s.low.push_back('i');
      s.low.push_back(0x307);
    }  // full mapping (SpecialCasing)
    else if (c == 0x3a3)
      s.low.push_back(final_sigma(s.cps.data(), s.cps.size(), i) ? 0x3c2 : 0x3c3);
    else
      s.low.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  s.nfd.clear();
  for (char32_t c : s.low) {
    if (c < 0x80) {
      s.nfd.push_back(c);
      continue;
    }
    utf8proc_int32_t d[32];
    int boundclass = 0;
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), d, 32, UTF8PROC_DECOMPOSE, &boundclass);
    for (utf8proc_ssize_t k = 0; k < n && k < 32; ++k) s.nfd.push_back(static_cast<char32_t>(d[k]));
  }
  // Canonical ordering (as utf8proc_decompose does): stable sort of combining marks by combining class.
  auto ccc = [](char32_t c) {
    return c < 0x300 ? 0 : utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
  };
  for (std::size_t i = 0; i + 1 < s.nfd.size();) {
    const int a = ccc(s.nfd[i]), b = ccc(s.nfd[i + 1]);
    if (a > b && b > 0) {
      std::swap(s.nfd[i], s.nfd[i + 1]);
      i = i > 0 ? i - 1 : i + 1;
    } else {
      ++i;
    }
  }
  s.norm.assign(2, '\0');
  for (char32_t c : s.nfd)
    if (c < 0x80)
      s.norm.push_back(static_cast<char>(c));
    else if (category(c) != UTF8PROC_CATEGORY_MN)
      append_utf8(s.norm, c);
}

// One whitespace token (in s.word): lower-case and strip accents if asked, then _run_split_on_punc; each
// resulting basic token goes to sink(char* p, size_t n) (p[-2], p[-1] writable, consumed bytes too).
template <class Sink>
void finish_token(const TokenizerOptions& o, Scratch& s, bool ascii, Sink& sink) {
  std::string* norm = &s.word;
  if (!ascii && o.do_lower_case) {
    lower_strip_accents(s);
    norm = &s.norm;
  }
  char* base = norm->data() + 2;
  const std::size_t n = norm->size() - 2;
  std::size_t run = 0;
  for (std::size_t i = 0; i < n;) {
    const auto c = static_cast<unsigned char>(base[i]);
    std::size_t len = 1;
    bool punct;
    if (c < 0x80) {
      punct = kAscii[c] == kPunct;
    } else {
      const auto* p = reinterpret_cast<const unsigned char*>(base + i);
      punct = is_punct(static_cast<char32_t>(decode(p, reinterpret_cast<const unsigned char*>(base + n))));
      len = static_cast<std::size_t>(p - reinterpret_cast<const unsigned char*>(base + i));
    }
    if (punct) {
      if (i > run) sink(base + run, i - run);
      sink(base + i, len);
      run = i + len;
    }
    i += len;
  }
  if (n > run) sink(base + run, n - run);
}

// BasicTokenizer.tokenize: _clean_text, _tokenize_chinese_chars, whitespace split, then finish_token.
template <class Sink>
void basic_tokens(const TokenizerOptions& o, std::string_view text, Sink&& sink) {
  Scratch& s = scratch();
  std::string& w = s.word;
  w.assign(2, '\0');
  bool ascii = true;
  auto flush = [&] {
    if (w.size() > 2) finish_token(o, s, ascii, sink);
    w.assign(2, '\0');
    ascii = true;
  };
  const bool lower = o.do_lower_case;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* e = p + text.size();
  while (p < e) {
    if (*p < 0x80) {
      const auto* q = p;
      while (q < e && *q < 0x80 && (kAscii[*q] == kKeep || kAscii[*q] == kPunct)) ++q;
      if (q > p) {  // a run of ASCII characters to keep
        const std::size_t at = w.size();
        w.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(q - p));
        if (lower)
          for (std::size_t i = at; i < w.size(); ++i) w[i] = kLower[static_cast<unsigned char>(w[i])];
        p = q;
      } else if (kAscii[*p++] == kSpace) {
        flush();
      }
      continue;
    }
    const auto* q = p;
    const std::int32_t cp = decode(p, e);
    if (cp < 0 || cp == 0xfffd) continue;
    const int cat = category(static_cast<char32_t>(cp));
    if (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF) continue;
    if (cat == UTF8PROC_CATEGORY_ZS || is_py_space(static_cast<char32_t>(cp))) {
      flush();
      continue;
    }
    const bool cjk = o.tokenize_chinese_chars && is_cjk(static_cast<char32_t>(cp));
    if (cjk) flush();
    w.append(reinterpret_cast<const char*>(q), static_cast<std::size_t>(p - q));
    ascii = false;
    if (cjk) flush();
  }
  flush();
}

// WordpieceTokenizer on one basic token at p[0..n): greedy longest-match-first; appends ids to out.
void wordpiece(const Vocab& v, std::int32_t max_chars, std::size_t max_len, char* p, std::size_t n,
               std::vector<std::int32_t>& out) {
  if (static_cast<std::int64_t>(n) > max_chars) {
    std::int64_t chars = 0;
    for (std::size_t i = 0; i < n; ++i) chars += (static_cast<unsigned char>(p[i]) & 0xc0) != 0x80;
    if (chars > max_chars) {
      out.push_back(v.unk_id());
      return;
    }
  }
  auto cont = [p](std::size_t i) { return (static_cast<unsigned char>(p[i]) & 0xc0) == 0x80; };
  const std::size_t first = out.size();
  for (std::size_t start = 0; start < n;) {
    const std::size_t prefix = start > 0 ? 2 : 0;
    std::size_t end = n;
    if (end - start + prefix > max_len) {  // no vocab token is that long
      end = start + (max_len > prefix ? max_len - prefix : 0);
      while (end > start && cont(end)) --end;
    }
    // Signed index: with start == 1, start - 2 would wrap (p + SIZE_MAX: undefined even though p[-1] exists).
    if (prefix) p[static_cast<std::ptrdiff_t>(start) - 2] = p[start - 1] = '#';
    std::int32_t id = -1;
    while (end > start) {
      id = v.find(std::string_view(p + start - prefix, end - start + prefix));
      if (id >= 0) break;
      do --end;
      while (end > start && cont(end));
    }
    if (id < 0) {
      out.resize(first);
      out.push_back(v.unk_id());
      return;
    }
    out.push_back(id);
    start = end;
  }
}

// Hash of a short byte string (vocab tokens are mostly under 16 bytes) and its first 8 bytes, zero-padded.
struct Key {
  std::uint64_t hash, head;
};
inline Key key_of(std::string_view s) {
  const char* p = s.data();
  std::size_t n = s.size();
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull), head = 0;
  auto mix = [&h](std::uint64_t w) {
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  };
  for (bool first = true; n; first = false) {
    std::uint64_t w = 0;
    if (n >= 8) {
      std::memcpy(&w, p, 8);
      p += 8;
      n -= 8;
    } else {
      for (std::size_t i = 0; i < n; ++i) w |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
      n = 0;
    }
    if (first) head = w;
    mix(w);
  }
  h *= 0x94d049bb133111ebull;
  return {h ^ (h >> 29), head};
}

// Slot tag: high hash bits and the length (capped at 255).
inline std::uint32_t tag_of(const Key& k, std::size_t n) {
  const auto len = static_cast<std::uint32_t>(std::min<std::size_t>(n, 255));
  return (static_cast<std::uint32_t>(k.hash >> 32) & ~0xffu) | len;
}

std::string vocab_name(const std::string& path) { return path.empty() ? "(in-memory vocab)" : path; }

}  // namespace

// ---- Vocab --------------------------------------------------------------------------------------------

// A tokenizers library file (tokenizer.json, what transformers 5 saves instead of vocab.txt): its WordPiece model's
// "vocab" map, token -> id, the ids exactly 0..n-1.
std::shared_ptr<const Vocab> Vocab::from_tokenizer_json(const std::string& text, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error("vocab " + path + ": neither one token per line nor valid JSON (tokenizer.json)");
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object() || !model->contains("vocab"))
    throw Error("vocab " + path + ": a JSON file without \"model\": {\"vocab\": ...} (expected a tokenizer.json)");
  const std::string type = model->value("type", "");
  if (type != "WordPiece")
    throw Error("vocab " + path + ": a tokenizer.json of a '" + type + "' model; bertx reads WordPiece (BERT) ones");
  const nlohmann::json& map = (*model)["vocab"];
  if (!map.is_object() || map.empty()) throw Error("vocab " + path + ": \"model\".\"vocab\" must map tokens to ids");
  auto v = std::make_shared<Vocab>();
  v->path_ = path;
  v->tokens_.resize(map.size());
  std::vector<bool> seen(map.size(), false);
  for (const auto& [token, id] : map.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::uint64_t>() >= map.size() ||
        seen[id.get<std::size_t>()])
      throw Error("vocab " + path + ": token '" + token.substr(0, 64) + "' has id " + id.dump() + "; the " +
                  std::to_string(map.size()) + " ids must be 0.." + std::to_string(map.size() - 1) + ", once each");
    seen[id.get<std::size_t>()] = true;
    v->tokens_[id.get<std::size_t>()] = token;
  }
  v->index();
  return v;
}

std::shared_ptr<const Vocab> Vocab::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("vocab " + path + ": cannot open (" + std::strerror(errno) + ")");
  if (std::filesystem::is_directory(path)) throw Error("vocab " + path + ": is a directory, not a vocab.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t first_char = text.find_first_not_of(" \t\r\n");
  if (first_char == std::string::npos) throw Error("vocab " + path + ": file is empty");
  if (text[first_char] == '{') return from_tokenizer_json(text, path);
  auto v = std::make_shared<Vocab>();
  v->path_ = path;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    // load_vocab's token.strip(): Python whitespace on both ends (so a CRLF file's "\r" too).
    const auto* b = reinterpret_cast<const unsigned char*>(text.data() + pos);
    const auto* e = reinterpret_cast<const unsigned char*>(text.data() + nl);
    const unsigned char *first = nullptr, *last = b;
    for (const auto* p = b; p < e;) {
      const auto* q = p;
      const std::int32_t cp = decode(p, e);
      if (cp >= 0 && is_py_space(static_cast<char32_t>(cp))) continue;
      if (!first) first = q;
      last = p;
    }
    if (first)
      v->tokens_.emplace_back(reinterpret_cast<const char*>(first), static_cast<std::size_t>(last - first));
    else
      v->tokens_.emplace_back();
    pos = nl + 1;
  }
  if (v->tokens_.size() > 0x7fffffffu) throw Error("vocab " + path + ": more than 2^31 tokens");
  v->index();
  return v;
}

std::shared_ptr<const Vocab> Vocab::from_tokens(std::vector<std::string> tokens) {
  auto v = std::make_shared<Vocab>();
  v->tokens_ = std::move(tokens);
  v->index();
  return v;
}

void Vocab::index() {
  std::size_t cap = 16;
  while (cap < 2 * tokens_.size()) cap *= 2;
  slots_.assign(cap, Slot{0, -1, 0});
  max_len_ = 0;
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& t = tokens_[i];
    max_len_ = std::max(max_len_, t.size());
    const std::int32_t old = find(t);
    if (old >= 0) {  // load_vocab fills a dict: the later line wins
      spdlog::warn("vocab {}: token '{}' on lines {} and {}; line {} (id {}) is used, as Google's load_vocab does",
                   vocab_name(path_), t, old + 1, i + 1, i + 1, i);
    }
    const Key key = key_of(t);
    std::size_t k = key.hash & (cap - 1);
    while (slots_[k].id >= 0 && slots_[k].id != old) k = (k + 1) & (cap - 1);
    slots_[k] = Slot{tag_of(key, t.size()), static_cast<std::int32_t>(i), key.head};
  }
  pad_ = find("[PAD]");
  unk_ = find("[UNK]");
  cls_ = find("[CLS]");
  sep_ = find("[SEP]");
  mask_ = find("[MASK]");
  // Capitalised common whole words exist only in cased vocabs (bert-base-cased has all of them,
  // bert-base-uncased and other lower-cased vocabs none).
  looks_cased_ = false;
  for (const char* w : {"The", "In", "He", "It", "A"}) looks_cased_ = looks_cased_ || find(w) >= 0;
}

std::int32_t Vocab::find(std::string_view token) const {
  const Key key = key_of(token);
  const std::uint32_t tag = tag_of(key, token.size());
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t k = key.hash & mask;; k = (k + 1) & mask) {
    const Slot& s = slots_[k];
    if (s.id < 0) return -1;
    if (s.tag == tag && s.head == key.head) {
      if (token.size() <= 8) return s.id;  // length and all bytes equal
      const std::string& t = tokens_[static_cast<std::size_t>(s.id)];
      if (t.size() == token.size() && std::memcmp(t.data() + 8, token.data() + 8, t.size() - 8) == 0) return s.id;
    }
  }
}

std::int32_t Vocab::id(std::string_view token) const {
  const std::int32_t i = find(token);
  if (i < 0) throw Error("vocab " + vocab_name(path_) + ": no token '" + std::string(token) + "'");
  return i;
}

// ---- Tokenizer ----------------------------------------------------------------------------------------

Tokenizer::Tokenizer(std::shared_ptr<const Vocab> vocab, TokenizerOptions options)
    : Tokenizer(std::move(vocab), options, true) {}

Tokenizer Tokenizer::unchecked(std::shared_ptr<const Vocab> vocab, TokenizerOptions options) {
  return Tokenizer(std::move(vocab), options, false);
}

Tokenizer::Tokenizer(std::shared_ptr<const Vocab> vocab, TokenizerOptions options, bool check)
    : vocab_(std::move(vocab)), options_(options) {
  if (!vocab_) throw Error("tokenizer: no vocab");
  const std::string name = vocab_name(vocab_->path());
  if (vocab_->unk_id() < 0) throw Error("vocab " + name + ": no token '[UNK]' (WordPiece needs it)");
  if (!check) return;
  if (options_.do_lower_case && vocab_->looks_cased())
    throw Error("vocab " + name +
                " looks cased (it has capitalised words such as 'The') but do_lower_case is "
                "true: use do_lower_case = false (bertx encode --cased) or an uncased vocab");
  if (!options_.do_lower_case && !vocab_->looks_cased())
    throw Error("vocab " + name +
                " looks uncased (no capitalised words such as 'The') but do_lower_case is "
                "false: use do_lower_case = true (drop --cased) or a cased vocab");
}

std::vector<std::string> Tokenizer::basic_tokenize(std::string_view text) const {
  std::vector<std::string> out;
  basic_tokens(options_, text, [&](char* p, std::size_t n) { out.emplace_back(p, n); });
  return out;
}

std::vector<std::string> Tokenizer::tokenize(std::string_view text) const {
  std::vector<std::int32_t> ids;
  encode(text, ids);
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (std::int32_t id : ids) out.push_back(vocab_->token(id));  // a piece is its vocab token, byte for byte
  return out;
}

void Tokenizer::encode(std::string_view text, std::vector<std::int32_t>& out) const {
  const Vocab& v = *vocab_;
  const std::int32_t max_chars = options_.max_input_chars_per_word;
  const std::size_t max_len = v.max_token_bytes();
  basic_tokens(options_, text, [&](char* p, std::size_t n) { wordpiece(v, max_chars, max_len, p, n, out); });
}

void Tokenizer::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  // WordpieceTokenizer.tokenize: whitespace_tokenize (Python str.split()), then each part.
  Scratch& s = scratch();
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  const auto* e = p + word.size();
  while (p < e) {
    s.norm.assign(2, '\0');
    while (p < e) {
      const auto* q = p;
      const std::int32_t cp = decode(p, e);
      if (cp >= 0 && is_py_space(static_cast<char32_t>(cp))) break;
      s.norm.append(reinterpret_cast<const char*>(q), static_cast<std::size_t>(p - q));
    }
    if (s.norm.size() > 2)
      wordpiece(*vocab_, options_.max_input_chars_per_word, vocab_->max_token_bytes(), s.norm.data() + 2,
                s.norm.size() - 2, out);
  }
}

}  // namespace bertx
