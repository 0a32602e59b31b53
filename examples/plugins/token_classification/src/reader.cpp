// reader.cpp - the `bio_tsv` DatasetReader (see reader.hpp): files parsed and tokenized at open(), batches
// padded to their longest chunk.
#include "reader.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

namespace ner {

namespace {

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

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
    throw bertx::Error("[data] bio_tsv: max_seq_length must be in [8, 4096], got " + std::to_string(cfg_.max_seq_length));
  if (!std::filesystem::is_directory(cfg_.data_dir))
    throw bertx::Error("[data] bio_tsv: data_dir = \"" + cfg_.data_dir + "\" is not a folder (expected one holding " + cfg_.train_file +
                       ", " + cfg_.eval_file + ")");
}

void BioReader::open(const bertx::DatasetContext& ctx) {
  ctx_ = ctx;
  if (ctx.world_size < 1 || ctx.rank < 0 || ctx.rank >= ctx.world_size)
    throw bertx::Error("[data] bio_tsv: rank " + std::to_string(ctx.rank) + " outside world size " + std::to_string(ctx.world_size));
  std::string name;
  if (ctx.split == "train") name = cfg_.train_file;
  else if (ctx.split == "eval") name = cfg_.eval_file;
  else if (ctx.split == "test") name = cfg_.test_file;
  else throw bertx::Error("[data] bio_tsv: unknown split '" + ctx.split + "' (train, eval, test)");
  file_ = (std::filesystem::path(cfg_.data_dir) / name).string();
  sentences_ = read_conll(file_, ctx.split != "test");
  if (sentences_.empty()) throw bertx::Error("[data] bio_tsv: no sentences in " + file_);
  labelled_ = !sentences_.front().tags.empty();
  auto vocab = bertx::Vocab::load(cfg_.vocab);
  vocab->id("[CLS]"), vocab->id("[SEP]"), vocab->id("[PAD]");  // throw naming the vocab when absent
  pad_id_ = vocab->pad_id();
  bertx::Tokenizer tokenizer(vocab, bertx::TokenizerOptions{cfg_.do_lower_case});
  chunks_ = featurize(tokenizer, sentences_, labelled_ ? &labels_ : nullptr, cfg_.max_seq_length, file_);
  const auto n = static_cast<std::int64_t>(chunks_.size());
  per_rank_ = (n - ctx.rank + ctx.world_size - 1) / ctx.world_size;
  epoch_ = sample_ = 0;
  order_epoch_ = -1;
}

std::optional<bertx::Batch> BioReader::next_batch() {
  const bool train = ctx_.split == "train";
  if (!train && sample_ >= per_rank_) return std::nullopt;
  if (per_rank_ == 0) throw bertx::Error("[data] bio_tsv: rank " + std::to_string(ctx_.rank) + " has no sentences in " + file_);
  const std::int64_t B = train ? ctx_.batch_size : std::min(ctx_.batch_size, per_rank_ - sample_);
  std::vector<std::size_t> rows;
  for (std::int64_t b = 0; b < B; ++b) {
    if (train && sample_ >= per_rank_) ++epoch_, sample_ = 0;
    const std::int64_t k = sample_ * ctx_.world_size + ctx_.rank;
    rows.push_back(train ? order(epoch_)[static_cast<std::size_t>(k)] : static_cast<std::size_t>(k));
    ++sample_;
  }
  if (train && sample_ >= per_rank_) ++epoch_, sample_ = 0;  // position() names the next sample
  return make_batch(rows);
}

void BioReader::seek(const bertx::ReaderPosition& p) {
  auto get = [&](const char* k) {
    auto it = p.find(k);
    if (it == p.end()) throw bertx::Error(std::string("[data] bio_tsv: reader position lacks '") + k + "'");
    return it->second;
  };
  epoch_ = get("epoch");
  sample_ = get("sample");
}

const std::vector<std::size_t>& BioReader::order(std::int64_t epoch) {
  if (order_epoch_ != epoch) {
    order_.resize(chunks_.size());
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    std::uint64_t s = ctx_.seed * 0x100000001B3ull ^ (static_cast<std::uint64_t>(epoch) * 0x9E3779B97F4A7C15ull);
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[splitmix(s) % i]);
    order_epoch_ = epoch;
  }
  return order_;
}

bertx::Batch BioReader::make_batch(const std::vector<std::size_t>& rows) const {
  const auto B = static_cast<std::int64_t>(rows.size());
  std::int64_t S = 0;
  for (std::size_t r : rows) S = std::max<std::int64_t>(S, static_cast<std::int64_t>(chunks_[r].ids.size()));
  at::Tensor ids = at::full({B, S}, pad_id_, at::kLong), mask = at::zeros({B, S}, at::kLong);  // (B, S)
  at::Tensor labels = at::full({B, S}, kIgnore, at::kLong), starts = at::zeros({B, S}, at::kLong);
  at::Tensor index = at::empty({B}, at::kLong);  // (B)
  auto id = ids.accessor<std::int64_t, 2>();
  auto ma = mask.accessor<std::int64_t, 2>();
  auto la = labels.accessor<std::int64_t, 2>();
  auto st = starts.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const Chunk& c = chunks_[rows[static_cast<std::size_t>(b)]];
    for (std::size_t t = 0; t < c.ids.size(); ++t) {
      const auto p = static_cast<std::int64_t>(t);
      id[b][p] = c.ids[t], ma[b][p] = 1, la[b][p] = c.labels[t], st[b][p] = c.word_start[t];
    }
    index[b] = static_cast<std::int64_t>(rows[static_cast<std::size_t>(b)]);
  }
  bertx::Batch batch;
  batch.tensors = {{"input_ids", ids}, {"token_type_ids", at::zeros({B, S}, at::kLong)}, {"attention_mask", mask},
                   {"word_starts", starts}, {"chunk_index", index}};
  if (labelled_) batch.tensors["labels"] = labels;
  return batch;
}

}  // namespace ner
