// plugin.cpp - the plugin's one entry point: registers the `token_classification` task and the `bio_tsv`
// dataset reader with the host (BERTX_PLUGIN defines the exported bertx_plugin_entry).
#include "bertx/plugin.hpp"

#include "reader.hpp"
#include "task.hpp"

namespace {

void register_ner(bertx::Registry& r) {
  const ner::TaskConfig t;
  bertx::add_task(r, "token_classification",
                  "token classification (NER): last layer -> dropout -> linear per token; strict-IOB2 entity precision/recall/F1",
                  {bertx::opt_required("num_labels", bertx::OptionType::Int, "number of tags: the length of [data] labels"),
                   bertx::opt_string("predictions", t.predictions, "file name (in the run's output folder, prefixed with the split) for predictions")},
                  [](const bertx::Options& o) {
                    ner::TaskConfig c;
                    c.num_labels = o.get_int("num_labels");
                    c.predictions = o.get_string("predictions");
                    return ner::make_task(c);
                  });
  const ner::ReaderConfig d;
  bertx::add_dataset(
      r, "bio_tsv", "CoNLL-style / BIO TSV files (word<TAB>tag, blank line between sentences): first-sub-token labelled pieces",
      {bertx::opt_required("data_dir", bertx::OptionType::String, "folder holding the split files"),
       bertx::opt_string("train_file", d.train_file, "training split, relative to data_dir"),
       bertx::opt_string("eval_file", d.eval_file, "labelled evaluation split, relative to data_dir"),
       bertx::opt_string("test_file", d.test_file, "prediction split (tags optional), relative to data_dir"),
       bertx::opt_required("vocab", bertx::OptionType::String, "the model's WordPiece vocab.txt"),
       bertx::opt_bool("do_lower_case", d.do_lower_case, "lower-case and strip accents (uncased models; BioBERT is cased)"),
       bertx::opt_int("max_seq_length", d.max_seq_length, "pieces per sequence with [CLS]/[SEP]; longer sentences become several chunks"),
       bertx::opt_required("labels", bertx::OptionType::StringList, "the tags, \"O\" among them; a tag's id is its position")},
      [](const bertx::Options& o) {
        ner::ReaderConfig c;
        c.data_dir = o.get_string("data_dir");
        c.train_file = o.get_string("train_file");
        c.eval_file = o.get_string("eval_file");
        c.test_file = o.get_string("test_file");
        c.vocab = o.get_string("vocab");
        c.do_lower_case = o.get_bool("do_lower_case");
        c.max_seq_length = o.get_int("max_seq_length");
        c.labels = o.get_strings("labels");
        return std::make_shared<ner::BioReader>(c);
      });
}

}  // namespace

BERTX_PLUGIN("token_classification", "0.1.0", "token classification (NER) task and CoNLL/BIO reader - an out-of-tree example", register_ner)
