// bio_data.hpp - CoNLL-style / BIO TSV files, the label map, and word -> WordPiece features with
// first-sub-token labelling. Pure C++ (the tokenizer is libbertx_core's): the reader plugin and the tests use it.
//
// File layout (BioBERT's NER sets - BC5CDR, NCBI-disease, ... - and CoNLL-2003): one word per line, columns
// separated by tabs (or, on a line without a tab, by spaces); the word is the first column, its tag the last;
// a blank line ends a sentence; "-DOCSTART-" lines are skipped. A line with a single column is an unlabelled
// word (allowed only where labels are not required: the test split).
// Features: [CLS] pieces [SEP]; the label of a word sits on its first WordPiece, every other position (later
// pieces, [CLS], [SEP], padding) carries -100 and is ignored by the loss (BioBERT / Hugging Face
// run_ner). A sentence longer than max_seq_length - 2 pieces is cut into several chunks at word
// boundaries, so every word is predicted; a word with no pieces (only characters the tokenizer drops)
// becomes [UNK].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bertx/tokenizer.hpp"

namespace ner {

constexpr std::int64_t kIgnore = -100;

struct Sentence {
  std::vector<std::string> words;
  std::vector<std::string> tags;  // empty for an unlabelled sentence
  std::int64_t line = 0;          // 1-based line of its first word (for messages)
};

// Throws bertx::Error naming file:line (missing file, a labelled/unlabelled mix, a missing tag where
// labels are required).
std::vector<Sentence> read_conll(const std::string& path, bool require_labels);

// Tag <-> id; id = position in the list given. Every label must be O, B-X, I-X, B or I, unique, "O" among
// them, and each I-X needs its B-X (and the reverse).
class LabelMap {
 public:
  explicit LabelMap(std::vector<std::string> labels);
  std::int64_t size() const { return static_cast<std::int64_t>(labels_.size()); }
  std::int64_t id(const std::string& tag) const;  // -1 when absent
  const std::string& name(std::int64_t id) const { return labels_.at(static_cast<std::size_t>(id)); }
  const std::vector<std::string>& names() const { return labels_; }

 private:
  std::vector<std::string> labels_;
};

struct Chunk {
  std::size_t sentence = 0;              // index into the file's sentences
  std::size_t first_word = 0;            // first word of the sentence in this chunk
  std::size_t words = 0;                 // words in this chunk
  std::vector<std::int32_t> ids;         // [CLS] pieces [SEP]
  std::vector<std::int64_t> labels;      // per position: the word's label id on its first piece, else kIgnore
  std::vector<std::uint8_t> word_start;  // per position: 1 on a word's first piece
};

// `labels` may be null (unlabelled data: labels stay kIgnore). A tag missing from the label map is an error
// naming `where` (the file) and the sentence's line. max_seq_length >= 3.
std::vector<Chunk> featurize(const bertx::Tokenizer& tokenizer, const std::vector<Sentence>& sentences,
                             const LabelMap* labels, std::int64_t max_seq_length, const std::string& where);

}  // namespace ner
