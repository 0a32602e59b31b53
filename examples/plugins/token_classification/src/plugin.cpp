// plugin.cpp - the plugin's one entry point: registers the `token_classification` task and the `bio_tsv`
// dataset reader with the host (BERTX_PLUGIN defines the exported bertx_plugin_entry).
#include "bertx/plugin.hpp"

#include "reader.hpp"
#include "task.hpp"

namespace {

// Each option once: key, member and doc here; default and comment in the config structs (task.hpp, reader.hpp).
const bertx::Fields<ner::TaskConfig>& task_fields() {
  using T = ner::TaskConfig;
  static const bertx::Fields<ner::TaskConfig> f{
      bertx::field_required("num_labels", &T::num_labels, "number of tags: the length of [data] labels"),
      bertx::field("predictions", &T::predictions,
                   "file name (in the run's output folder, prefixed with the split) for predictions"),
  };
  return f;
}

const bertx::Fields<ner::ReaderConfig>& reader_fields() {
  using R = ner::ReaderConfig;
  static const bertx::Fields<ner::ReaderConfig> f{
      bertx::field_required("data_dir", &R::data_dir, "folder holding the split files"),
      bertx::field("train_file", &R::train_file, "training split, relative to data_dir"),
      bertx::field("eval_file", &R::eval_file, "labelled evaluation split, relative to data_dir"),
      bertx::field("test_file", &R::test_file, "prediction split (tags optional), relative to data_dir"),
      bertx::field_required("vocab", &R::vocab, "the model's WordPiece vocab.txt"),
      bertx::field("do_lower_case", &R::do_lower_case,
                   "lower-case and strip accents (uncased models; BioBERT is cased)"),
      bertx::field("max_seq_length", &R::max_seq_length,
                   "pieces per sequence with [CLS]/[SEP]; longer sentences become several chunks"),
      bertx::field_required("labels", &R::labels, "the tags, \"O\" among them; a tag's id is its position"),
  };
  return f;
}

void register_ner(bertx::Registry& r) {
  bertx::add_task(
      r, "token_classification",
      "token classification (NER): last layer -> dropout -> linear per token; strict-IOB2 entity precision/recall/F1",
      task_fields().schema(), [](const bertx::Options& o) { return ner::make_task(task_fields().read(o)); });
  bertx::add_dataset(
      r, "bio_tsv",
      "CoNLL-style / BIO TSV files (word<TAB>tag, blank line between sentences): first-sub-token labelled pieces",
      reader_fields().schema(),
      [](const bertx::Options& o) { return std::make_shared<ner::BioReader>(reader_fields().read(o)); });
}

}  // namespace

BERTX_PLUGIN("token_classification", "0.1.0",
             "token classification (NER) task and CoNLL/BIO reader - an out-of-tree example", register_ner)
