// reader.cpp - the `squad` DatasetReader (see reader.hpp): features built once at open(), batches padded to
// max_seq_length as run_squad's, the training order a pure function of (seed, epoch) so seek() is exact.
#include "reader.hpp"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "bertx/error.hpp"

namespace bertx::squad {

namespace {

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Tokenizer make_tokenizer(const SquadDataConfig& c) {
  if (c.vocab.empty()) throw Error("[data] squad: vocab = \"path/to/vocab.txt\" is required (the model's WordPiece vocabulary)");
  TokenizerOptions o;
  o.do_lower_case = c.do_lower_case;
  return Tokenizer(Vocab::load(c.vocab), o);
}

}  // namespace

SquadReader::SquadReader(SquadDataConfig c) : cfg_(std::move(c)), tokenizer_(make_tokenizer(cfg_)) {}

void SquadReader::open(const DatasetContext& context) {
  ctx_ = context;
  if (ctx_.world_size < 1 || ctx_.rank < 0 || ctx_.rank >= ctx_.world_size)
    throw Error("[data] squad: rank " + std::to_string(ctx_.rank) + " outside world size " + std::to_string(ctx_.world_size));
  const bool training = ctx_.split == "train";
  file_ = training ? cfg_.train_file : ctx_.split == "eval" ? cfg_.eval_file : (cfg_.test_file.empty() ? cfg_.eval_file : cfg_.test_file);
  data_ = std::make_unique<Dataset>();
  if (file_.empty()) {  // e.g. the training reader of an eval-only run: fine until a batch is asked for
    features_ = std::make_unique<Features>(*data_, tokenizer_, cfg_.features, training);
    per_rank_ = 0;
    return;
  }
  *data_ = read_dataset(file_, ReadOptions{training, cfg_.version_2_with_negative});
  if (!data_->skipped.empty()) {
    for (const Skip& s : data_->skipped) spdlog::warn("[data] squad {}: question {} skipped: {}", file_, s.id, s.reason);
    spdlog::warn("[data] squad {}: {} of {} questions skipped (answer not found in the context, as run_squad.py skips them)",
                 file_, data_->skipped.size(), data_->skipped.size() + data_->examples.size());
  }
  features_ = std::make_unique<Features>(*data_, tokenizer_, cfg_.features, training);
  const auto n = static_cast<std::int64_t>(features_->features().size());
  per_rank_ = training ? (n - ctx_.rank + ctx_.world_size - 1) / ctx_.world_size : n;
  spdlog::info("[data] squad {} ({} split): {} questions -> {} features of {} tokens", file_, ctx_.split, data_->examples.size(), n,
               cfg_.features.max_seq_length);
}

void SquadReader::shuffle_epoch() {
  const auto n = static_cast<std::int64_t>(features_->features().size());
  std::vector<std::int32_t> all(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  std::uint64_t s = ctx_.seed * 0x100000001B3ull ^ (static_cast<std::uint64_t>(epoch_) << 40);
  for (std::int64_t i = n - 1; i > 0; --i)  // Fisher-Yates, the same on every platform
    std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(splitmix(s) % static_cast<std::uint64_t>(i + 1))]);
  order_.clear();
  for (std::int64_t i = ctx_.rank; i < n; i += ctx_.world_size) order_.push_back(all[static_cast<std::size_t>(i)]);
  shuffled_epoch_ = epoch_;
}

std::optional<Batch> SquadReader::next_batch() {
  const bool training = ctx_.split == "train";
  if (file_.empty())
    throw Error(std::string("[data] squad: no ") + (training ? "train_file" : "eval_file") + " set for the " + ctx_.split + " split");
  if (per_rank_ == 0) throw Error("[data] squad " + file_ + ": no features (no usable questions)");
  if (sample_ >= per_rank_) {
    if (!training) return std::nullopt;
    ++epoch_;
    sample_ = 0;
  }
  if (training && shuffled_epoch_ != epoch_) shuffle_epoch();
  const std::int64_t B = std::min<std::int64_t>(ctx_.batch_size, per_rank_ - sample_), S = cfg_.features.max_seq_length;
  at::Tensor ids = at::empty({B, S}, at::kLong), types = at::empty({B, S}, at::kLong), mask = at::empty({B, S}, at::kLong);
  at::Tensor starts = at::empty({B}, at::kLong), ends = at::empty({B}, at::kLong), index = at::empty({B}, at::kLong);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t row = training ? order_[static_cast<std::size_t>(sample_ + b)] : sample_ + b;
    const Feature& f = features_->features()[static_cast<std::size_t>(row)];
    features_->write_row(f, ids.data_ptr<std::int64_t>() + b * S, types.data_ptr<std::int64_t>() + b * S,
                         mask.data_ptr<std::int64_t>() + b * S);
    starts.data_ptr<std::int64_t>()[b] = f.start_position;
    ends.data_ptr<std::int64_t>()[b] = f.end_position;
    index.data_ptr<std::int64_t>()[b] = row;
  }
  sample_ += B;
  Batch batch;
  batch.tensors = {{"input_ids", ids},          {"token_type_ids", types}, {"attention_mask", mask},
                   {"start_positions", starts}, {"end_positions", ends},   {"feature_index", index}};
  return batch;
}

void SquadReader::seek(const ReaderPosition& p) {
  auto get = [&](const char* k) {
    auto it = p.find(k);
    if (it == p.end()) throw Error(std::string("[data] squad: reader position lacks '") + k + "'");
    return it->second;
  };
  epoch_ = get("epoch");
  sample_ = get("sample");
  shuffled_epoch_ = -1;
}

}  // namespace bertx::squad
