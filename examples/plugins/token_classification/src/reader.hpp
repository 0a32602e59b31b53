// reader.hpp - the `bio_tsv` DatasetReader: a folder of CoNLL-style / BIO files (train, eval, test) turned
// into first-sub-token labelled WordPiece batches. The task's evaluator reads the sentences and chunks
// behind a batch from it (chunk_index) to score whole sentences at the word level.
// Batches: input_ids, token_type_ids (zeros), attention_mask (B, S) int64; labels (B, S) int64 (-100 except
// on a word's first piece; absent for an unlabelled split); word_starts (B, S) int64 (1 on a word's first
// piece); chunk_index (B) int64. The order is bertx::Sampler's (bertx/sampler.hpp): training a stream over
// epochs reshuffled from (seed, epoch), rank r of w taking the permutation's entries r, r + w, ...;
// evaluation / test one pass in file order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bertx/dataset.hpp"
#include "bertx/sampler.hpp"
#include "bio_data.hpp"

namespace ner {

struct ReaderConfig {
  std::string data_dir;                  // folder holding the split files
  std::string train_file = "train.tsv";  // BioBERT's layout: train.tsv, devel.tsv, test.tsv
  std::string eval_file = "devel.tsv";
  std::string test_file = "test.tsv";
  std::string vocab;                  // the model's WordPiece vocab.txt
  bool do_lower_case = false;         // BioBERT is cased
  std::int64_t max_seq_length = 128;  // pieces per sequence with [CLS] and [SEP]; longer sentences are chunked
  std::vector<std::string> labels;    // the label map: id = position
};

class BioReader final : public bertx::DatasetReader {
 public:
  explicit BioReader(ReaderConfig config);

  void open(const bertx::DatasetContext& context) override;
  std::optional<bertx::Batch> next_batch() override;
  std::int64_t epoch() const override { return sampler_.epoch(); }
  bertx::ReaderPosition position() const override { return sampler_.position(); }
  void seek(const bertx::ReaderPosition& position) override { sampler_.seek(position); }
  std::int64_t samples_per_epoch() const override { return sampler_.samples_per_epoch(); }

  // For the evaluator: what the open split holds.
  const LabelMap& labels() const { return labels_; }
  const std::vector<Sentence>& sentences() const { return sentences_; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  bool labelled() const { return labelled_; }
  const std::string& file() const { return file_; }

 private:
  bertx::Batch make_batch(const std::vector<std::int64_t>& rows) const;

  ReaderConfig cfg_;
  LabelMap labels_;
  bertx::DatasetContext ctx_;
  std::string file_;
  std::vector<Sentence> sentences_;
  std::vector<Chunk> chunks_;
  bertx::Sampler sampler_;
  std::int64_t pad_id_ = 0;
  bool labelled_ = true;
};

}  // namespace ner
