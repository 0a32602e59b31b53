// reader.cpp - the `bio_tsv` DatasetReader (see reader.hpp): files parsed and tokenized at open(), batches
// padded to their longest chunk.
#include "reader.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

namespace ner {

namespace {

LabelMap checked_labels(const std::vector<std::string>& labels) {
  try {
    return LabelMap(labels);
  } catch (const bertx::Error& e) {
    throw bertx::Error(std::string("[data] bio_tsv: ") + e.what());
  }
}

}  // namespace

BioReader::BioReader(ReaderConfig c) : cfg_(std::move(c)), labels_(checked_labels(cfg_.labels)) {
  if (cfg_.max_seq_length < 8 || cfg_.max_seq_length > 4096)
    throw bertx::Error("[data] bio_tsv: max_seq_length must be in [8, 4096], got " +
                       std::to_string(cfg_.max_seq_length));
  if (!std::filesystem::is_directory(cfg_.data_dir))
    throw bertx::Error("[data] bio_tsv: data_dir = \"" + cfg_.data_dir + "\" is not a folder (expected one holding " +
                       cfg_.train_file + ", " + cfg_.eval_file + ")");
}

void BioReader::open(const bertx::DatasetContext& ctx) {
  ctx_ = ctx;
  bertx::check_rank("[data] bio_tsv", ctx.rank, ctx.world_size);
  std::string name;
  if (ctx.split == "train")
    name = cfg_.train_file;
  else if (ctx.split == "eval")
    name = cfg_.eval_file;
  else if (ctx.split == "test")
    name = cfg_.test_file;
  else
    throw bertx::Error("[data] bio_tsv: unknown split '" + ctx.split + "' (train, eval, test)");
  file_ = (std::filesystem::path(cfg_.data_dir) / name).string();
  sentences_ = read_conll(file_, ctx.split != "test");
  if (sentences_.empty()) throw bertx::Error("[data] bio_tsv: no sentences in " + file_);
  labelled_ = !sentences_.front().tags.empty();
  auto vocab = bertx::Vocab::load(cfg_.vocab);
  vocab->id("[CLS]"), vocab->id("[SEP]"), vocab->id("[PAD]");  // throw naming the vocab when absent
  pad_id_ = vocab->pad_id();
  bertx::Tokenizer tokenizer(vocab, bertx::TokenizerOptions{cfg_.do_lower_case});
  chunks_ = featurize(tokenizer, sentences_, labelled_ ? &labels_ : nullptr, cfg_.max_seq_length, file_);
  bertx::SamplerOptions o;
  o.name = "[data] bio_tsv", o.rows = static_cast<std::int64_t>(chunks_.size()), o.batch_size = ctx.batch_size;
  o.rank = ctx.rank, o.world_size = ctx.world_size, o.seed = ctx.seed, o.shuffle = o.repeat = ctx.split == "train";
  sampler_ = bertx::Sampler(o);
}

std::optional<bertx::Batch> BioReader::next_batch() {
  if (ctx_.split == "train" && sampler_.samples_per_epoch() == 0)
    throw bertx::Error("[data] bio_tsv: rank " + std::to_string(ctx_.rank) + " has no sentences in " + file_);
  auto rows = sampler_.next();
  if (!rows) return std::nullopt;
  return make_batch(rows->rows);
}

bertx::Batch BioReader::make_batch(const std::vector<std::int64_t>& rows) const {
  const auto B = static_cast<std::int64_t>(rows.size());
  std::int64_t S = 0;
  for (std::int64_t r : rows)
    S = std::max<std::int64_t>(S, static_cast<std::int64_t>(chunks_[static_cast<std::size_t>(r)].ids.size()));
  at::Tensor ids = at::full({B, S}, pad_id_, at::kLong), mask = at::zeros({B, S}, at::kLong);  // (B, S)
  at::Tensor labels = at::full({B, S}, kIgnore, at::kLong), starts = at::zeros({B, S}, at::kLong);
  at::Tensor index = at::empty({B}, at::kLong);  // (B)
  auto id = ids.accessor<std::int64_t, 2>();
  auto ma = mask.accessor<std::int64_t, 2>();
  auto la = labels.accessor<std::int64_t, 2>();
  auto st = starts.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const Chunk& c = chunks_[static_cast<std::size_t>(rows[static_cast<std::size_t>(b)])];
    for (std::size_t t = 0; t < c.ids.size(); ++t) {
      const auto p = static_cast<std::int64_t>(t);
      id[b][p] = c.ids[t], ma[b][p] = 1, la[b][p] = c.labels[t], st[b][p] = c.word_start[t];
    }
    index[b] = rows[static_cast<std::size_t>(b)];
  }
  bertx::Batch batch;
  batch.tensors = {{"input_ids", ids},
                   {"token_type_ids", at::zeros({B, S}, at::kLong)},
                   {"attention_mask", mask},
                   {"word_starts", starts},
                   {"chunk_index", index}};
  if (labelled_) batch.tensors["labels"] = labels;
  return batch;
}

}  // namespace ner
