// reader.cpp - the `glue` DatasetReader: a GLUE task folder (train.tsv, dev*.tsv, test*.tsv) tokenized at
// open() into [CLS] A [SEP] B [SEP] sequences, batched with per-batch padding (to the longest sequence of
// the batch; attention_mask hides the rest, so results equal Google's pad-to-max_seq_length).
// Batches: input_ids, token_type_ids, attention_mask (B, S) int64; labels (B) int64 (float for STS-B;
// absent on the test split); example_index (B) int64 (the test file's index, else the row ordinal) and
// example_set (B) int64 (MNLI: 0 matched, 1 mismatched) - what the classification task's evaluator needs to
// score MNLI-m/-mm separately and write submission files.
// Order (bertx/sampler.hpp): training is a stream over epochs, reshuffled per epoch from (seed, epoch); a batch
// may span two epochs, so ceil(epochs x examples / batch) steps see exactly `epochs` epochs. Rank r of w takes
// the permutation's entries r, r + w, ... Evaluation / test: one pass in file order.
#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "bertx/dataset.hpp"
#include "bertx/sampler.hpp"
#include "components.hpp"
#include "features.hpp"
#include "tasks.hpp"

namespace {

namespace glue = bertx::glue;

struct GlueReaderConfig {
  std::string task;                   // GLUE task: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli
  std::string data_dir;               // the task's folder of the GLUE download (train.tsv, dev.tsv, test.tsv)
  std::string vocab;                  // the model's WordPiece vocab.txt (a Hugging Face folder has one)
  bool do_lower_case = true;          // lower-case and strip accents (uncased models)
  std::int64_t max_seq_length = 128;  // tokens per sequence with [CLS] and [SEP]s; longer pairs are truncated
};

class GlueReader final : public bertx::DatasetReader {
 public:
  explicit GlueReader(GlueReaderConfig c) : cfg_(std::move(c)), spec_(glue::task(cfg_.task)) {
    if (cfg_.max_seq_length < 4 || cfg_.max_seq_length > 4096)
      throw bertx::Error("[data] glue: max_seq_length must be in [4, 4096], got " +
                         std::to_string(cfg_.max_seq_length));
    if (!std::filesystem::is_directory(cfg_.data_dir))
      throw bertx::Error("[data] glue: data_dir = \"" + cfg_.data_dir + "\" is not a folder (expected the " +
                         spec_.display + " folder of the GLUE download)");
  }

  void open(const bertx::DatasetContext& ctx) override {
    ctx_ = ctx;
    bertx::check_rank("[data] glue", ctx.rank, ctx.world_size);
    std::vector<std::string> files;
    const bool labelled = ctx.split != "test";
    if (ctx.split == "train")
      files = {"train.tsv"};
    else if (ctx.split == "eval")
      files = spec_.eval_files;
    else if (ctx.split == "test")
      files = spec_.test_files;
    else
      throw bertx::Error("[data] glue: unknown split '" + ctx.split + "' (train, eval, test)");
    examples_.clear();
    for (std::size_t s = 0; s < files.size(); ++s) {
      auto part = glue::load_examples(spec_, (std::filesystem::path(cfg_.data_dir) / files[s]).string(), labelled,
                                      static_cast<std::int64_t>(s));
      examples_.insert(examples_.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
    }
    if (examples_.empty()) throw bertx::Error("[data] glue: no examples in " + cfg_.data_dir + "/" + files.front());
    auto vocab = bertx::Vocab::load(cfg_.vocab);
    vocab->id("[CLS]"), vocab->id("[SEP]"), vocab->id("[PAD]");  // throw naming the vocab when absent
    pad_id_ = vocab->pad_id();
    bertx::Tokenizer tokenizer(vocab, bertx::TokenizerOptions{cfg_.do_lower_case});
    const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    features_ = glue::featurize_all(tokenizer, examples_, cfg_.max_seq_length, threads);
    for (auto& e : examples_) e.text_a.clear(), e.text_a.shrink_to_fit(), e.text_b.clear(), e.text_b.shrink_to_fit();
    labelled_ = labelled;
    bertx::SamplerOptions o;
    o.name = "[data] glue", o.rows = static_cast<std::int64_t>(examples_.size()), o.batch_size = ctx.batch_size;
    o.rank = ctx.rank, o.world_size = ctx.world_size, o.seed = ctx.seed, o.shuffle = o.repeat = ctx.split == "train";
    sampler_ = bertx::Sampler(o);
  }

  std::optional<bertx::Batch> next_batch() override {
    if (ctx_.split == "train" && sampler_.samples_per_epoch() == 0)
      throw bertx::Error("[data] glue: rank " + std::to_string(ctx_.rank) + " has no examples");
    auto rows = sampler_.next();
    if (!rows) return std::nullopt;
    return make_batch(rows->rows);
  }

  std::int64_t epoch() const override { return sampler_.epoch(); }
  bertx::ReaderPosition position() const override { return sampler_.position(); }
  void seek(const bertx::ReaderPosition& p) override { sampler_.seek(p); }
  std::int64_t samples_per_epoch() const override { return sampler_.samples_per_epoch(); }

 private:
  bertx::Batch make_batch(const std::vector<std::int64_t>& rows) const {
    const auto B = static_cast<std::int64_t>(rows.size());
    std::int64_t S = 0;
    for (std::int64_t r : rows)
      S = std::max<std::int64_t>(S, static_cast<std::int64_t>(features_[static_cast<std::size_t>(r)].ids.size()));
    at::Tensor ids = at::full({B, S}, pad_id_, at::kLong), types = at::zeros({B, S}, at::kLong),
               mask = at::zeros({B, S}, at::kLong);                                                   // (B, S)
    at::Tensor index = at::empty({B}, at::kLong), set = at::empty({B}, at::kLong);                    // (B)
    at::Tensor labels = spec_.regression() ? at::empty({B}, at::kFloat) : at::empty({B}, at::kLong);  // (B)
    auto id = ids.accessor<std::int64_t, 2>();
    auto ty = types.accessor<std::int64_t, 2>();
    auto ma = mask.accessor<std::int64_t, 2>();
    for (std::int64_t b = 0; b < B; ++b) {
      const auto row = static_cast<std::size_t>(rows[static_cast<std::size_t>(b)]);
      const glue::Features& f = features_[row];
      const glue::Example& e = examples_[row];
      for (std::size_t t = 0; t < f.ids.size(); ++t) {
        id[b][static_cast<std::int64_t>(t)] = f.ids[t];
        ty[b][static_cast<std::int64_t>(t)] = static_cast<std::int32_t>(t) >= f.type_b_from ? 1 : 0;
        ma[b][static_cast<std::int64_t>(t)] = 1;
      }
      index[b] = e.index;
      set[b] = e.set;
      if (spec_.regression())
        labels[b] = e.value;
      else
        labels[b] = e.label;
    }
    bertx::Batch batch;
    batch.tensors = {{"input_ids", ids},
                     {"token_type_ids", types},
                     {"attention_mask", mask},
                     {"example_index", index},
                     {"example_set", set}};
    if (labelled_) batch.tensors["labels"] = labels;
    return batch;
  }

  GlueReaderConfig cfg_;
  const glue::TaskSpec& spec_;
  bertx::DatasetContext ctx_;
  std::vector<glue::Example> examples_;
  std::vector<glue::Features> features_;
  bertx::Sampler sampler_;
  std::int64_t pad_id_ = 0;
  bool labelled_ = true;
};

const bertx::Fields<GlueReaderConfig>& glue_fields() {
  using G = GlueReaderConfig;
  static const bertx::Fields<GlueReaderConfig> f{
      bertx::field_required("task", &G::task, "GLUE task", glue::task_names()),
      bertx::field_required("data_dir", &G::data_dir,
                            "the task's folder of the GLUE download (train.tsv, dev.tsv, test.tsv)"),
      bertx::field_required("vocab", &G::vocab, "the model's WordPiece vocab.txt"),
      bertx::field("do_lower_case", &G::do_lower_case, "lower-case and strip accents (uncased models)"),
      bertx::field("max_seq_length", &G::max_seq_length,
                   "tokens per sequence with [CLS]/[SEP]; longer pairs are truncated"),
  };
  return f;
}

void register_glue(bertx::Registry& r) {
  bertx::add_dataset(r, "glue",
                     "GLUE task folders (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI; BLUE ChemProt): TSV -> "
                     "[CLS] A [SEP] B [SEP]",
                     glue_fields().schema(),
                     [](const bertx::Options& o) { return std::make_shared<GlueReader>(glue_fields().read(o)); });
}

}  // namespace

void bertx::glue::register_reader(Registry& registry) { ::register_glue(registry); }
