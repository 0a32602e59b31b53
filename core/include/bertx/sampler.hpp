// bertx/sampler.hpp - the one sampler behind the DatasetReaders: which rows of a split make each batch, on which
// rank, in which epoch. It owns the epoch, the shard by rank, the seeded per-epoch shuffle and the position that
// checkpoints store (ReaderPosition) and seek() restores; a reader gives its row count, asks next() for the rows
// of each batch and builds the batch's tensors from them. Header-only: plugins include it as it is.
//
// An epoch's order is a permutation of [0, rows): Fisher-Yates (back to front, splitmix64 % (i + 1)) seeded from
// (seed, epoch) as EpochSeed says, or file order without shuffle. Rank r of w takes, with Sharding::Interleaved,
// the order's entries r, r + w, r + 2w, ...; with Sharding::Batches, the order cut into global batches of
// batch_size, global batch g going to rank g % w (w ranks then see what one process sees with w-fold gradient
// accumulation). drop_last keeps only whole batches, the same number on every rank.
// Batching::Stream (training): every batch is full, the last one of an epoch continuing into the next, so
// ceil(epochs x rows / batch) batches see exactly `epochs` epochs; position() always names the next sample.
// Batching::Epoch: a batch stays inside its epoch, the last one short; the next epoch starts at the next call.
// Without repeat (evaluation) one pass in order, then no more batches.
// Position: {"epoch", e} and {"sample", i} (this rank's samples of epoch e already taken), or {"batch", j} with
// Sharding::Batches. After seek(position()) the sampler yields exactly the rows it would have yielded.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertx/dataset.hpp"
#include "bertx/error.hpp"
#include "bertx/rng.hpp"

namespace bertx {

enum class Sharding { Interleaved, Batches };
enum class Batching { Stream, Epoch };
// How an epoch's shuffle seed derives from (seed, epoch): seed * 0x100000001B3 xor the epoch times 2^64/phi
// (Golden: glue, bio_tsv; the default for new readers) or shifted left by 40 bits (Shift40: squad). Both stay so
// that every reader keeps the order its checkpoints and runs were made with.
enum class EpochSeed { Golden, Shift40 };

struct SamplerOptions {
  std::string name = "[data] sampler";  // prefix of error messages, e.g. "[data] glue"
  std::int64_t rows = 0;                // rows of the split, all ranks together
  std::int64_t batch_size = 1;          // rows per batch on this rank
  int rank = 0;                         // data-parallel rank
  int world_size = 1;                   // data-parallel ranks
  std::uint64_t seed = 0;               // run seed
  bool shuffle = true;                  // a fresh permutation each epoch; false: file order
  bool repeat = true;                   // epochs follow each other (training); false: one pass (evaluation)
  bool drop_last = false;               // whole batches only, as many on every rank
  Sharding sharding = Sharding::Interleaved;
  Batching batching = Batching::Stream;
  EpochSeed epoch_seed = EpochSeed::Golden;
};

// The rows of one batch, and the epoch of its first row (Batching::Stream: the rest may be of the next one).
struct SampledRows {
  std::int64_t epoch = 0;
  std::vector<std::int64_t> rows;
};

// Throws, naming `name`, unless 0 <= rank < world_size (readers call it first thing in open()).
inline void check_rank(const std::string& name, int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw Error(name + ": rank " + std::to_string(rank) + " outside world size " + std::to_string(world_size));
}

// The shuffle seed of `epoch` (see EpochSeed).
inline std::uint64_t epoch_shuffle_seed(std::uint64_t seed, std::int64_t epoch, EpochSeed how) {
  const auto e = static_cast<std::uint64_t>(epoch);
  return seed * 0x100000001B3ULL ^ (how == EpochSeed::Golden ? e * 0x9E3779B97F4A7C15ULL : e << 40);
}

// A permutation of [0, rows): Fisher-Yates from splitmix64(state), the same on every platform.
inline std::vector<std::int64_t> shuffled_rows(std::int64_t rows, std::uint64_t state) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[splitmix64(state) % i]);
  return order;
}

class Sampler {
 public:
  Sampler() = default;
  explicit Sampler(SamplerOptions o) : o_(std::move(o)) {
    check_rank(o_.name, o_.rank, o_.world_size);
    if (o_.rows < 0) throw Error(o_.name + ": negative row count " + std::to_string(o_.rows));
    if (o_.batch_size < 1)
      throw Error(o_.name + ": batch_size must be at least 1, got " + std::to_string(o_.batch_size));
    if (o_.sharding == Sharding::Batches && o_.batching != Batching::Epoch)
      throw Error(o_.name + ": a sampler that shards whole batches needs Batching::Epoch");
    per_rank_ = count_per_rank();
  }

  // The rows of the next batch; nullopt after the one pass of a sampler without repeat.
  std::optional<SampledRows> next() {
    if (per_rank_ == 0) {
      if (!o_.repeat) return std::nullopt;
      throw Error(o_.name + ": rank " + std::to_string(o_.rank) + " has no rows to sample");
    }
    if (sample_ >= per_rank_) {
      if (!o_.repeat) return std::nullopt;
      ++epoch_, sample_ = 0;
    }
    const bool stream = o_.repeat && o_.batching == Batching::Stream;
    const std::int64_t B = stream ? o_.batch_size : std::min(o_.batch_size, per_rank_ - sample_);
    SampledRows out;
    out.epoch = epoch_;
    out.rows.reserve(static_cast<std::size_t>(B));
    for (std::int64_t b = 0; b < B; ++b) {
      if (sample_ >= per_rank_) ++epoch_, sample_ = 0;  // Stream only: the batch goes on into the next epoch
      out.rows.push_back(row(epoch_, sample_));
      ++sample_;
    }
    if (stream && sample_ >= per_rank_) ++epoch_, sample_ = 0;  // position() names the next sample
    return out;
  }

  // The row behind this rank's `i`-th sample of `epoch` (0 <= i < samples_per_epoch()).
  std::int64_t row(std::int64_t epoch, std::int64_t i) {
    const std::int64_t w = o_.world_size, r = o_.rank, B = o_.batch_size;
    const std::int64_t k = o_.sharding == Sharding::Interleaved ? i * w + r : ((i / B) * w + r) * B + i % B;
    if (!o_.shuffle) return k;
    if (order_epoch_ != epoch) {
      order_ = shuffled_rows(o_.rows, epoch_shuffle_seed(o_.seed, epoch, o_.epoch_seed));
      order_epoch_ = epoch;
    }
    return order_[static_cast<std::size_t>(k)];
  }

  std::int64_t epoch() const { return epoch_; }
  std::int64_t samples_per_epoch() const { return per_rank_; }  // this rank's
  const SamplerOptions& options() const { return o_; }

  ReaderPosition position() const {
    if (o_.sharding == Sharding::Batches)
      return {{"epoch", epoch_}, {"batch", (sample_ + o_.batch_size - 1) / o_.batch_size}};
    return {{"epoch", epoch_}, {"sample", sample_}};
  }
  // Throws naming the missing or negative key. A position past the epoch's end starts the next epoch.
  void seek(const ReaderPosition& p) {
    const bool batches = o_.sharding == Sharding::Batches;
    epoch_ = get(p, "epoch");
    sample_ = batches ? std::min(get(p, "batch") * o_.batch_size, per_rank_) : get(p, "sample");
  }

 private:
  std::int64_t get(const ReaderPosition& p, const char* key) const {
    auto it = p.find(key);
    if (it == p.end()) throw Error(o_.name + ": reader position lacks '" + key + "'");
    if (it->second < 0)
      throw Error(o_.name + ": reader position has " + key + " = " + std::to_string(it->second) + " (negative)");
    return it->second;
  }

  std::int64_t count_per_rank() const {
    const std::int64_t N = o_.rows, w = o_.world_size, r = o_.rank, B = o_.batch_size;
    if (o_.drop_last) return N / (w * B) * B;
    if (o_.sharding == Sharding::Interleaved) return (N - r + w - 1) / w;
    const std::int64_t global = (N + B - 1) / B;  // global batches, the last one maybe short
    if (global == 0) return 0;
    const std::int64_t mine = global / w + (r < global % w ? 1 : 0);
    return mine * B - (r == (global - 1) % w ? global * B - N : 0);
  }

  SamplerOptions o_;
  std::int64_t per_rank_ = 0, epoch_ = 0, sample_ = 0;
  std::int64_t order_epoch_ = -1;    // the epoch order_ was shuffled for
  std::vector<std::int64_t> order_;  // that epoch's permutation of all rows
};

}  // namespace bertx
