// plan.cpp - epoch plans: seeded file and row shuffles per bin, rank slices, the bin interleave.
#include "plan.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "bertx/error.hpp"
#include "bertx/rng.hpp"

namespace bertx::hdf5_pretraining {

SamplePlan::SamplePlan(std::vector<ShardFile> files, std::int64_t batch_size, int rank, int world, std::uint64_t seed,
                       bool train)
    : files_(std::move(files)), batch_size_(batch_size), rank_(rank), world_(world), seed_(seed), train_(train) {
  if (batch_size < 1) throw Error("hdf5_pretraining: batch size must be >= 1 (got " + std::to_string(batch_size) + ")");
  if (world < 1 || rank < 0 || rank >= world)
    throw Error("hdf5_pretraining: rank " + std::to_string(rank) + " outside world size " + std::to_string(world));
  std::map<std::int32_t, std::size_t> by_len;
  for (std::size_t f = 0; f < files_.size(); ++f) {
    if (files_[f].rows == 0) continue;
    auto [it, fresh] = by_len.emplace(files_[f].seq_len, bins_.size());
    if (fresh) bins_.push_back({files_[f].seq_len, {}, 0});
    bins_[it->second].files.push_back(static_cast<std::int32_t>(f));
    bins_[it->second].samples += files_[f].rows;
    total_ += files_[f].rows;
  }
  std::sort(bins_.begin(), bins_.end(), [](const Bin& a, const Bin& b) { return a.seq_len < b.seq_len; });
  perm_.resize(bins_.size());
  for (const Bin& b : bins_) {
    std::int64_t n;
    if (train_) {
      n = b.samples / (static_cast<std::int64_t>(world_) * batch_size_);
      samples_per_epoch_ += n * batch_size_;
    } else {
      const std::int64_t all = (b.samples + batch_size_ - 1) / batch_size_;  // eval batches of the bin, all ranks
      n = all / world_ + (rank_ < all % world_ ? 1 : 0);
      for (std::int64_t j = rank_; j < all; j += world_)
        samples_per_epoch_ += std::min(batch_size_, b.samples - j * batch_size_);
    }
    bin_batches_.push_back(n);
    batches_per_epoch_ += n;
  }
}

std::vector<std::int32_t> SamplePlan::row_order(std::int64_t epoch, std::int32_t file) const {
  std::vector<std::int32_t> rows(static_cast<std::size_t>(files_[static_cast<std::size_t>(file)].rows));
  std::iota(rows.begin(), rows.end(), 0);
  if (train_) {
    Rng rng(mix_seed({seed_, static_cast<std::uint64_t>(epoch), 0xF11EULL, static_cast<std::uint64_t>(file)}));
    rng.shuffle(rows.begin(), rows.end());
  }
  return rows;
}

void SamplePlan::prepare(std::int64_t epoch) {
  if (state_.epoch == epoch) return;
  EpochState s;
  s.epoch = epoch;
  for (std::size_t k = 0; k < bins_.size(); ++k) {
    std::vector<std::int32_t> order = bins_[k].files;
    if (train_) {
      Rng rng(mix_seed({seed_, static_cast<std::uint64_t>(epoch), 0xB10CULL, k}));
      rng.shuffle(order.begin(), order.end());
    }
    std::vector<std::int64_t> offset{0};
    for (std::int32_t f : order) offset.push_back(offset.back() + files_[static_cast<std::size_t>(f)].rows);
    s.file_order.push_back(std::move(order));
    s.file_offset.push_back(std::move(offset));
  }
  // The batch sequence: bins interleaved (seeded, the same on every rank), each bin's batches in order.
  for (std::size_t k = 0; k < bins_.size(); ++k)
    for (std::int64_t j = 0; j < bin_batches_[k]; ++j) s.batch_bin.push_back(static_cast<std::int32_t>(k));
  if (train_ && bins_.size() > 1) {
    Rng rng(mix_seed({seed_, static_cast<std::uint64_t>(epoch), 0xB1B5ULL}));
    rng.shuffle(s.batch_bin.begin(), s.batch_bin.end());
  }
  std::vector<std::int64_t> next(bins_.size(), 0);
  for (std::int32_t k : s.batch_bin) {
    const std::int64_t j = next[static_cast<std::size_t>(k)]++;
    s.batch_in_bin.push_back(
        train_ ? j : rank_ + j * world_);  // eval: the rank's j-th batch is global batch rank + j*world
  }
  state_ = std::move(s);
}

SampleRef SamplePlan::at(std::int32_t bin, std::int64_t position) {
  const auto& offset = state_.file_offset[static_cast<std::size_t>(bin)];
  const auto it = std::upper_bound(offset.begin(), offset.end(), position);
  const auto idx = static_cast<std::size_t>(it - offset.begin() - 1);
  const std::int32_t file = state_.file_order[static_cast<std::size_t>(bin)][idx];
  PermCache& pc = perm_[static_cast<std::size_t>(bin)];
  if (pc.file != file || pc.epoch != state_.epoch) {
    pc.rows = row_order(state_.epoch, file);
    pc.file = file;
    pc.epoch = state_.epoch;
  }
  return {file, pc.rows[static_cast<std::size_t>(position - offset[idx])]};
}

PlannedBatch SamplePlan::batch(std::int64_t epoch, std::int64_t index) {
  if (index < 0 || index >= batches_per_epoch_)
    throw Error("hdf5_pretraining: batch " + std::to_string(index) + " outside the epoch's " +
                std::to_string(batches_per_epoch_));
  prepare(epoch);
  PlannedBatch b;
  b.bin = state_.batch_bin[static_cast<std::size_t>(index)];
  const Bin& bin = bins_[static_cast<std::size_t>(b.bin)];
  b.seq_len = bin.seq_len;
  const std::int64_t j = state_.batch_in_bin[static_cast<std::size_t>(index)];
  const std::int64_t first = train_ ? (j * world_ + rank_) * batch_size_ : j * batch_size_;
  const std::int64_t last = std::min(first + batch_size_, bin.samples);
  b.samples.reserve(static_cast<std::size_t>(last - first));
  for (std::int64_t p = first; p < last; ++p) b.samples.push_back(at(b.bin, p));
  return b;
}

}  // namespace bertx::hdf5_pretraining
