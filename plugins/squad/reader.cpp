// reader.cpp - the `squad` DatasetReader (see reader.hpp): features built once at open(), batches padded to
// max_seq_length as run_squad's, the training order bertx::Sampler's (a pure function of (seed, epoch), so seek()
// is exact; EpochSeed::Shift40, the order squad always had; batches stay inside their epoch, the last one short).
#include "reader.hpp"

#include <mutex>
#include <set>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "bertx/error.hpp"

namespace bertx::squad {

namespace {

Tokenizer make_tokenizer(const SquadDataConfig& c) {
  if (c.vocab.empty())
    throw Error("[data] squad: vocab = \"path/to/vocab.txt\" is required (the model's WordPiece vocabulary)");
  TokenizerOptions o;
  o.do_lower_case = c.do_lower_case;
  return Tokenizer(Vocab::load(c.vocab), o);
}

// The readers this library has built and not yet destroyed (SquadReader::of).
std::mutex live_mutex;
std::set<const DatasetReader*> live_readers;

}  // namespace

SquadReader::SquadReader(SquadDataConfig c) : cfg_(std::move(c)), tokenizer_(make_tokenizer(cfg_)) {
  std::lock_guard<std::mutex> lock(live_mutex);
  live_readers.insert(this);
}

SquadReader::~SquadReader() {
  std::lock_guard<std::mutex> lock(live_mutex);
  live_readers.erase(this);
}

const SquadReader* SquadReader::of(const DatasetReader& reader) {
  std::lock_guard<std::mutex> lock(live_mutex);
  return live_readers.count(&reader) ? static_cast<const SquadReader*>(&reader) : nullptr;
}

void SquadReader::open(const DatasetContext& context) {
  ctx_ = context;
  check_rank("[data] squad", ctx_.rank, ctx_.world_size);
  const bool training = ctx_.split == "train";
  file_ = training               ? cfg_.train_file
          : ctx_.split == "eval" ? cfg_.eval_file
                                 : (cfg_.test_file.empty() ? cfg_.eval_file : cfg_.test_file);
  data_ = std::make_unique<Dataset>();
  if (file_.empty()) {  // e.g. the training reader of an eval-only run: fine until a batch is asked for
    features_ = std::make_unique<Features>(*data_, tokenizer_, cfg_.features, training);
    sampler_ = Sampler();
    return;
  }
  *data_ = read_dataset(file_, ReadOptions{training, cfg_.version_2_with_negative});
  if (!data_->skipped.empty()) {
    for (const Skip& s : data_->skipped)
      spdlog::warn("[data] squad {}: question {} skipped: {}", file_, s.id, s.reason);
    spdlog::warn(
        "[data] squad {}: {} of {} questions skipped (answer not found in the context, as run_squad.py skips them)",
        file_, data_->skipped.size(), data_->skipped.size() + data_->examples.size());
  }
  features_ = std::make_unique<Features>(*data_, tokenizer_, cfg_.features, training);
  const auto n = static_cast<std::int64_t>(features_->features().size());
  SamplerOptions o;  // training: shuffled, rank r of w takes every w-th; eval / test: every rank all features in order
  o.name = "[data] squad", o.rows = n, o.batch_size = ctx_.batch_size, o.seed = ctx_.seed;
  o.rank = training ? ctx_.rank : 0, o.world_size = training ? ctx_.world_size : 1;
  o.shuffle = o.repeat = training, o.batching = Batching::Epoch, o.epoch_seed = EpochSeed::Shift40;
  sampler_ = Sampler(o);
  spdlog::info("[data] squad {} ({} split): {} questions -> {} features of {} tokens", file_, ctx_.split,
               data_->examples.size(), n, cfg_.features.max_seq_length);
}

std::optional<Batch> SquadReader::next_batch() {
  const bool training = ctx_.split == "train";
  if (file_.empty())
    throw Error(std::string("[data] squad: no ") + (training ? "train_file" : "eval_file") + " set for the " +
                ctx_.split + " split");
  if (sampler_.samples_per_epoch() == 0) throw Error("[data] squad " + file_ + ": no features (no usable questions)");
  const std::optional<SampledRows> rows = sampler_.next();
  if (!rows) return std::nullopt;
  const auto B = static_cast<std::int64_t>(rows->rows.size()), S = cfg_.features.max_seq_length;
  at::Tensor ids = at::empty({B, S}, at::kLong), types = at::empty({B, S}, at::kLong),
             mask = at::empty({B, S}, at::kLong);
  at::Tensor starts = at::empty({B}, at::kLong), ends = at::empty({B}, at::kLong), index = at::empty({B}, at::kLong);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t row = rows->rows[static_cast<std::size_t>(b)];
    const Feature& f = features_->features()[static_cast<std::size_t>(row)];
    features_->write_row(f, ids.data_ptr<std::int64_t>() + b * S, types.data_ptr<std::int64_t>() + b * S,
                         mask.data_ptr<std::int64_t>() + b * S);
    starts.data_ptr<std::int64_t>()[b] = f.start_position;
    ends.data_ptr<std::int64_t>()[b] = f.end_position;
    index.data_ptr<std::int64_t>()[b] = row;
  }
  Batch batch;
  batch.tensors = {{"input_ids", ids},          {"token_type_ids", types}, {"attention_mask", mask},
                   {"start_positions", starts}, {"end_positions", ends},   {"feature_index", index}};
  return batch;
}

}  // namespace bertx::squad
