// synthetic.cpp - a DatasetReader of random pre-training samples, as the seeds' benchmark mode uses
// synthetic data: every sample is a pure function of (seed, epoch, sample index), so seek() is exact.
// Sample-to-rank assignment (bertx::Sampler, Sharding::Batches; batch size B, world size w, N = samples_per_epoch):
// the epoch is cut into global batches of B consecutive samples, and rank r's j-th batch is global batch j*w + r.
// So w ranks with batch B see, at every optimizer step, exactly the micro-batches one process with batch B and
// w-fold gradient accumulation sees (its micro-batch r is rank r's batch). Training keeps the ranks in
// step: each rank gets floor(N / (w*B)) batches per epoch (the rest of the epoch is left out). Evaluation
// leaves nothing out: global batches ceil(N / B), the last one short, batch g on rank g % w.
#include <ATen/ATen.h>

#include "bertx/dataset.hpp"
#include "bertx/sampler.hpp"
#include "components.hpp"

namespace {

struct SyntheticConfig {
  std::int64_t vocab_size = 30522;        // ids drawn from [999, vocab_size) (past BERT's special tokens)
  std::int64_t seq_len = 128;             // tokens per sample
  std::int64_t max_predictions = 20;      // masked positions per sample
  std::int64_t samples_per_epoch = 4096;  // across all ranks
};

class Synthetic final : public bertx::DatasetReader {
 public:
  explicit Synthetic(SyntheticConfig c) : cfg_(c) {
    if (c.seq_len < 8 || c.max_predictions < 1 || c.max_predictions > c.seq_len - 3 || c.vocab_size < 1100)
      throw bertx::Error(
          "[data] synthetic: need seq_len >= 8, 1 <= max_predictions <= seq_len - 3, vocab_size >= 1100");
  }

  void open(const bertx::DatasetContext& ctx) override {
    ctx_ = ctx;
    bertx::check_rank("[data] synthetic", ctx.rank, ctx.world_size);
    bertx::SamplerOptions o;
    o.name = "[data] synthetic", o.rows = cfg_.samples_per_epoch, o.batch_size = ctx.batch_size, o.rank = ctx.rank;
    o.world_size = ctx.world_size, o.shuffle = false, o.repeat = o.drop_last = ctx.split != "eval";
    o.sharding = bertx::Sharding::Batches, o.batching = bertx::Batching::Epoch;
    sampler_ = bertx::Sampler(o);
    if (o.repeat && sampler_.samples_per_epoch() == 0)
      throw bertx::Error("[data] synthetic: samples_per_epoch = " + std::to_string(o.rows) +
                         " is less than one batch per rank (batch_size " + std::to_string(o.batch_size) + " x " +
                         std::to_string(o.world_size) + " rank(s))");
  }

  std::optional<bertx::Batch> next_batch() override {
    const std::optional<bertx::SampledRows> rows = sampler_.next();
    if (!rows) return std::nullopt;
    const auto B = static_cast<std::int64_t>(rows->rows.size());
    const std::int64_t S = cfg_.seq_len, P = cfg_.max_predictions;
    at::Tensor ids = at::empty({B, S}, at::kLong), types = at::zeros({B, S}, at::kLong),
               mask = at::ones({B, S}, at::kLong);
    at::Tensor positions = at::zeros({B, P}, at::kLong), labels = at::full({B, P}, -100, at::kLong),
               nsp = at::empty({B}, at::kLong);
    auto id = ids.accessor<std::int64_t, 2>();
    auto ty = types.accessor<std::int64_t, 2>();
    auto po = positions.accessor<std::int64_t, 2>();
    auto la = labels.accessor<std::int64_t, 2>();
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t index = rows->rows[static_cast<std::size_t>(b)];  // global sample index
      // (seed, epoch) mixed as the sampler's Shift40 epoch seeds are, then the sample: the same bits as ever
      std::uint64_t s = bertx::epoch_shuffle_seed(ctx_.seed, rows->epoch, bertx::EpochSeed::Shift40) ^
                        static_cast<std::uint64_t>(index);
      const std::int64_t mid = S / 2;
      for (std::int64_t t = 0; t < S; ++t) {
        id[b][t] =
            999 + static_cast<std::int64_t>(bertx::splitmix64(s) % static_cast<std::uint64_t>(cfg_.vocab_size - 999));
        ty[b][t] = t > mid ? 1 : 0;
      }
      id[b][0] = 101;  // [CLS]
      id[b][mid] = 102;
      id[b][S - 1] = 102;  // [SEP]
      std::int64_t p = 0;
      for (std::int64_t t = 1; t < S - 1 && p < P; ++t) {  // ascending positions, as Google's instances
        if (t == mid) continue;
        const std::int64_t left = S - 2 - t, need = P - p;
        if (static_cast<std::int64_t>(bertx::splitmix64(s) % static_cast<std::uint64_t>(left + 1)) < need) {
          po[b][p] = t;
          la[b][p] = id[b][t];
          id[b][t] = 103;  // [MASK]
          ++p;
        }
      }
      nsp[b] = static_cast<std::int64_t>(bertx::splitmix64(s) & 1);
    }
    bertx::Batch batch;
    batch.tensors = {{"input_ids", ids},           {"token_type_ids", types},
                     {"attention_mask", mask},     {"masked_lm_positions", positions},
                     {"masked_lm_labels", labels}, {"next_sentence_labels", nsp}};
    return batch;
  }

  std::int64_t epoch() const override { return sampler_.epoch(); }
  bertx::ReaderPosition position() const override { return sampler_.position(); }  // {"epoch", "batch"}
  void seek(const bertx::ReaderPosition& p) override { sampler_.seek(p); }
  std::int64_t samples_per_epoch() const override { return sampler_.samples_per_epoch(); }  // this rank's

 private:
  SyntheticConfig cfg_;
  bertx::DatasetContext ctx_;
  bertx::Sampler sampler_;
};

const bertx::Fields<SyntheticConfig>& synthetic_fields() {
  using S = SyntheticConfig;
  static const bertx::Fields<SyntheticConfig> f{
      bertx::field("vocab_size", &S::vocab_size, "ids are drawn from [999, vocab_size)"),
      bertx::field("seq_len", &S::seq_len, "tokens per sample"),
      bertx::field("max_predictions", &S::max_predictions, "masked positions per sample"),
      bertx::field("samples_per_epoch", &S::samples_per_epoch, "samples per epoch across all ranks"),
  };
  return f;
}

void register_synthetic(bertx::Registry& r) {
  bertx::add_dataset(r, "synthetic", "random pre-training samples (benchmarks, tests); deterministic per seed",
                     synthetic_fields().schema(),
                     [](const bertx::Options& o) { return std::make_shared<Synthetic>(synthetic_fields().read(o)); });
}

}  // namespace

void bertx::pretraining::register_synthetic(Registry& registry) { ::register_synthetic(registry); }
