// squad_data.hpp - SQuAD JSON (v1.1 and v2.0) to BERT features, as Google's run_squad.py does it
// (read_squad_examples + convert_examples_to_features): the context is split on whitespace (" \t\r\n" and
// U+202F), each word WordPiece-tokenized, answers mapped from characters to words to word pieces and
// tightened by _improve_answer_span; the question is cut to max_query_length pieces; documents longer
// than a window become windows of max_seq_length tokens every doc_stride pieces, each piece flagged
// "max context" in the window where it has the most context on both sides.
// No LibTorch: shared by the squad plugin (reader.cpp, task.cpp) and the tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bertx/tokenizer.hpp"

namespace bertx::squad {

struct Paragraph {
  std::string context;
  std::vector<std::string> doc_tokens;      // context split on run_squad's whitespace
  std::vector<std::int32_t> piece_ids;      // WordPiece ids of all doc_tokens (all_doc_tokens)
  std::vector<std::int32_t> piece_to_word;  // tok_to_orig_index: doc_tokens index of each piece
  std::vector<std::int32_t> word_to_piece;  // orig_to_tok_index: first piece of each doc token
};

struct Example {
  std::string id;
  std::string question;
  std::int32_t paragraph = 0;        // index into Dataset::paragraphs
  std::vector<std::string> answers;  // every gold answer text (for scoring); empty = unanswerable
  bool is_impossible = false;        // v2.0: no answer in the context
  // Training only: the first answer, its first and last doc_tokens index (-1 when impossible).
  std::string orig_answer_text;
  std::int32_t start_word = -1, end_word = -1;
};

// A question dropped from training, as run_squad drops it ("Could not find answer"), with why.
struct Skip {
  std::string id;
  std::string reason;
};

struct Dataset {
  std::string path;
  std::string version;  // the file's "version" ("" when absent)
  std::vector<Paragraph> paragraphs;
  std::vector<Example> examples;  // file order
  std::vector<Skip> skipped;      // training: answers that do not match their context
  bool labelled = true;           // every question has an "answers" field (scores can be computed)
};

struct ReadOptions {
  bool is_training = false;              // map answers to words, drop mismatches (read_squad_examples' is_training)
  bool version_2_with_negative = false;  // v2.0: read is_impossible (training needs the field)
};

// Throws bertx::Error naming the file and question id on a missing or mistyped field, a duplicate id,
// or (training, v1.1) a question without an answer.
Dataset read_dataset(const std::string& path, const ReadOptions& options);

// A paragraph of `context` split into doc_tokens as read_dataset splits it (Features tokenizes it). char_to_word,
// when given, gets the doc_tokens index of every code point (-1 before the first word).
Paragraph make_paragraph(std::string context, std::vector<std::int32_t>* char_to_word = nullptr);

struct FeatureOptions {
  std::int64_t max_seq_length = 384;   // tokens per window: [CLS] question [SEP] document piece [SEP]
  std::int64_t doc_stride = 128;       // pieces between the starts of two windows of one document
  std::int64_t max_query_length = 64;  // question pieces kept
};

// One window ("feature") of one example. Sequence layout: [CLS] query [SEP] doc[span_start, +span_length) [SEP].
struct Feature {
  std::int32_t example = 0;         // index into Dataset::examples
  std::int32_t span_index = 0;      // which window of its example
  std::int32_t span_start = 0;      // first document piece of the window
  std::int32_t span_length = 0;     // document pieces in the window
  std::int32_t start_position = 0;  // training: answer span in the sequence; 0, 0 ([CLS]) when the
  std::int32_t end_position = 0;    //   answer is not in this window or the question is impossible
};

// Per example: the truncated question and the windows (for max-context flags).
struct ExampleWindows {
  std::vector<std::int32_t> query_ids;
  std::vector<std::pair<std::int32_t, std::int32_t>> spans;  // (start, length) in document pieces
  std::int32_t first_feature = 0;  // its features are [first_feature, first_feature + spans.size())
  std::int32_t answer_start_piece = -1, answer_end_piece = -1;  // training: improved answer span (pieces)
};

class Features {
 public:
  // Tokenizes the paragraphs of `data` (once each) and cuts every example into windows.
  Features(Dataset& data, const Tokenizer& tokenizer, const FeatureOptions& options, bool is_training);

  const std::vector<Feature>& features() const { return features_; }
  const ExampleWindows& windows(std::int32_t example) const { return windows_.at(static_cast<std::size_t>(example)); }
  const FeatureOptions& options() const { return options_; }

  // Writes one padded row of input_ids / token_type_ids / attention_mask (max_seq_length each).
  void write_row(const Feature& f, std::int64_t* input_ids, std::int64_t* token_type_ids,
                 std::int64_t* attention_mask) const;
  // Tokens before padding: query + window + 3.
  std::int64_t length(const Feature& f) const;
  // token_to_orig_map: the doc_tokens index of sequence position `pos`, -1 outside the document part.
  std::int32_t word_at(const Feature& f, std::int64_t pos) const;
  // The WordPiece id at sequence position `pos` (< length(f)).
  std::int32_t id_at(const Feature& f, std::int64_t pos) const;
  // token_is_max_context: the window where document position `pos` has the most context is this one.
  bool is_max_context(const Feature& f, std::int64_t pos) const;

 private:
  const Dataset* data_;
  std::int32_t cls_, sep_;
  FeatureOptions options_;
  std::vector<ExampleWindows> windows_;
  std::vector<Feature> features_;
};

// _improve_answer_span: the sub-span of pieces [start, end] whose pieces equal the answer's pieces, else
// the input span.
std::pair<std::int32_t, std::int32_t> improve_answer_span(const std::vector<std::int32_t>& doc_pieces,
                                                          std::int32_t start, std::int32_t end,
                                                          const std::vector<std::int32_t>& answer_pieces);

// Code point helpers (SQuAD offsets count code points, as Python's str does).
std::u32string utf8_to_u32(std::string_view s);
std::string u32_to_utf8(std::u32string_view s);

}  // namespace bertx::squad
