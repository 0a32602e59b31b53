// reader.hpp - the `squad` DatasetReader: SQuAD JSON files turned into run_squad features (squad_data.hpp)
// and batched. Splits: "train" (train_file; features shuffled per epoch, rank r of w takes every w-th),
// "eval" (eval_file, one pass in order) and "test" (test_file, else eval_file). Batches hold input_ids,
// token_type_ids, attention_mask (B, S), start_positions, end_positions (B) and feature_index (B): the
// feature row each sequence came from, which the squad task's evaluator uses to map logits back to text.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "bertx/dataset.hpp"
#include "bertx/sampler.hpp"
#include "bertx/tokenizer.hpp"
#include "squad_data.hpp"

namespace bertx::squad {

struct SquadDataConfig {
  std::string train_file;                // training JSON (train-v1.1.json / train-v2.0.json)
  std::string eval_file;                 // labelled JSON scored by [train] eval (dev-v1.1.json)
  std::string test_file;                 // JSON whose predictions [train] predict writes; "" = eval_file
  std::string vocab;                     // the model's vocab.txt
  bool do_lower_case = true;             // uncased vocab (also get_final_text's BasicTokenizer)
  bool version_2_with_negative = false;  // SQuAD 2.0: unanswerable questions (is_impossible)
  FeatureOptions features;               // max_seq_length 384, doc_stride 128, max_query_length 64
};

class SquadReader final : public DatasetReader {
 public:
  explicit SquadReader(SquadDataConfig c);
  ~SquadReader() override;
  SquadReader(const SquadReader&) = delete;
  SquadReader& operator=(const SquadReader&) = delete;

  // `reader` as a squad reader when this library built it (the host hands the task the [data] reader, which may
  // be any plugin's), else nullptr: a lookup among the live readers of this plugin, no RTTI across libraries.
  static const SquadReader* of(const DatasetReader& reader);

  void open(const DatasetContext& context) override;
  std::optional<Batch> next_batch() override;
  std::int64_t epoch() const override { return sampler_.epoch(); }
  ReaderPosition position() const override { return sampler_.position(); }
  void seek(const ReaderPosition& p) override { sampler_.seek(p); }
  std::int64_t samples_per_epoch() const override { return sampler_.samples_per_epoch(); }

  // What the squad task's evaluator needs (valid after open()).
  const Dataset& dataset() const { return *data_; }
  const Features& features() const { return *features_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const SquadDataConfig& config() const { return cfg_; }

 private:
  SquadDataConfig cfg_;
  Tokenizer tokenizer_;
  DatasetContext ctx_;
  std::string file_;  // the split's file
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Features> features_;
  Sampler sampler_;  // the split's feature order (bertx/sampler.hpp)
};

}  // namespace bertx::squad
