// bertx/tokenizer.hpp - WordPiece tokenization exactly as Google's BERT tokenization.py (FullTokenizer).
//
// BasicTokenizer: clean text (drop NUL, U+FFFD and control chars; whitespace -> ' '), put spaces around
// CJK ideographs, split on whitespace, optionally lower-case + strip accents (NFD, drop Mn), split on
// punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P*). WordpieceTokenizer: greedy longest-
// match-first with "##" continuations; a word longer than max_input_chars_per_word chars -> [UNK].
// Thread-safe: a tokenizer is immutable after construction; call it from any number of threads.
// Implemented in core/src/text/tokenizer.cpp (libbertx_core), usable from plugins.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertx/version.hpp"

namespace bertx {

// vocab.txt: one token per line, id = line number (0-based); each line is stripped of surrounding whitespace
// like Google's load_vocab (token.strip(), so a CRLF file's "\r" too). A token on two lines maps to the later
// line's id (load_vocab fills a dict), with a warning naming both lines. A file starting with '{' is read as a
// tokenizers library tokenizer.json (transformers 5 saves no vocab.txt): its WordPiece model's token -> id map.
class BERTX_EXPORT Vocab {
 public:
  // Throws bertx::Error naming the file (missing, unreadable, empty).
  static std::shared_ptr<const Vocab> load(const std::string& path);
  static std::shared_ptr<const Vocab> from_tokens(std::vector<std::string> tokens);
  // All tokens in id order: the vocab.txt lines.
  const std::vector<std::string>& tokens() const { return tokens_; }

  std::int32_t size() const { return static_cast<std::int32_t>(tokens_.size()); }
  // -1 when absent.
  std::int32_t find(std::string_view token) const;
  // Throws bertx::Error when absent ("vocab <path>: no token '[MASK]'").
  std::int32_t id(std::string_view token) const;
  const std::string& token(std::int32_t id) const { return tokens_.at(static_cast<std::size_t>(id)); }
  const std::string& path() const { return path_; }  // "" for from_tokens
  // Longest token in bytes (WordPiece never looks up a longer substring).
  std::size_t max_token_bytes() const { return max_len_; }

  std::int32_t pad_id() const { return pad_; }
  std::int32_t unk_id() const { return unk_; }
  std::int32_t cls_id() const { return cls_; }
  std::int32_t sep_id() const { return sep_; }
  std::int32_t mask_id() const { return mask_; }
  // A cased vocab: it holds one of the capitalised whole words "The", "In", "He", "It", "A" (bert-base-cased
  // has all of them, lower-cased vocabs none).
  bool looks_cased() const { return looks_cased_; }

 private:
  static std::shared_ptr<const Vocab> from_tokenizer_json(const std::string& text, const std::string& path);
  void index();
  std::string path_;
  std::vector<std::string> tokens_;
  // Open-addressing index, a power-of-two size over 2x the tokens: a slot holds hash bits + length, the id
  // (-1: empty) and the token's first 8 bytes, so most lookups touch one cache line: encode runs 1.5x
  // faster than with an unordered_map<string_view, int32_t>.
  struct Slot {
    std::uint32_t tag;
    std::int32_t id;
    std::uint64_t head;
  };
  std::vector<Slot> slots_;
  std::size_t max_len_ = 0;
  std::int32_t pad_ = -1, unk_ = -1, cls_ = -1, sep_ = -1, mask_ = -1;
  bool looks_cased_ = false;
};

struct TokenizerOptions {
  bool do_lower_case = true;                    // uncased models; false for cased (and BioBERT)
  std::int32_t max_input_chars_per_word = 200;  // Google's tokenization.py (Hugging Face uses 100)
  bool tokenize_chinese_chars = true;           // spaces around CJK ideographs
};

class BERTX_EXPORT Tokenizer {
 public:
  // Throws bertx::Error when the vocab lacks [UNK], or when do_lower_case contradicts the vocab's casing
  // (an uncased vocab used cased or the reverse: a known cause of silently bad models).
  Tokenizer(std::shared_ptr<const Vocab> vocab, TokenizerOptions options);
  // Same, but skips the casing check (for tools that deliberately mix).
  static Tokenizer unchecked(std::shared_ptr<const Vocab> vocab, TokenizerOptions options);

  // BasicTokenizer output (UTF-8 words).
  std::vector<std::string> basic_tokenize(std::string_view text) const;
  // WordPiece pieces of `text`.
  std::vector<std::string> tokenize(std::string_view text) const;
  // Appends the ids of `text` to `out` (the fast path: no per-token strings).
  void encode(std::string_view text, std::vector<std::int32_t>& out) const;
  std::vector<std::int32_t> encode(std::string_view text) const {
    std::vector<std::int32_t> out;
    encode(text, out);
    return out;
  }
  // WordPiece of already basic-tokenized text (WordpieceTokenizer.tokenize alone: split on whitespace, no
  // cleaning or lower-casing); appends ids to `out`.
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;

  const Vocab& vocab() const { return *vocab_; }
  const TokenizerOptions& options() const { return options_; }

 private:
  Tokenizer(std::shared_ptr<const Vocab> vocab, TokenizerOptions options, bool check);
  std::shared_ptr<const Vocab> vocab_;
  TokenizerOptions options_;
};

}  // namespace bertx
