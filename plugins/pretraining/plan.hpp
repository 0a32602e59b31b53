// plan.hpp - which samples a rank reads, in which order, for every epoch of the hdf5_pretraining reader.
// No LibTorch, no I/O: shapes in, (file, row) lists out, so it is cheap to test and to recompute on seek.
//
// Files are grouped into length bins by their sequence length (one bin for NVIDIA's phase-1/2 data, several
// for data binned by `bertx data pretrain --bin-size`). For training epoch e (seed_e = mix(seed, e)):
//  - each bin's files are shuffled, and each file's rows are shuffled (seed from (seed_e, file));
//    their concatenation is the bin's sample sequence;
//  - bin k holds floor(samples_k / (world * B)) batches per rank (the remainder is left out of this epoch
//    only); batch j of bin k on rank r is sequence positions [(j*world + r)*B, +B): ranks are disjoint;
//  - the epoch's batches interleave bins in a seeded random order that is the same on every rank (all
//    ranks pad to the same length at every step), each bin's batches in sequence (files are read in order).
//  So with one bin, w ranks at batch B get at every step the micro-batches one process at batch B with
//  w-fold accumulation gets (rank r's batch = its micro-batch r), until the epoch's end when floor(samples /
//  B) is not a multiple of w; with several bins the interleave differs between world sizes.
// Evaluation: no shuffling and nothing left out; batch j of a bin goes to rank j % world; bins in order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bertx::hdf5_pretraining {

struct ShardFile {
  std::string path;
  std::int64_t rows = 0;
  std::int32_t seq_len = 0, max_predictions = 0;
};

struct SampleRef {
  std::int32_t file;  // index into the plan's files
  std::int32_t row;   // row in that file (the in-file shuffle already applied)
};

struct PlannedBatch {
  std::int32_t bin = 0;
  std::int32_t seq_len = 0;
  std::vector<SampleRef> samples;  // B (training) or <= B (last eval batch)
};

class SamplePlan {
 public:
  SamplePlan() = default;
  SamplePlan(std::vector<ShardFile> files, std::int64_t batch_size, int rank, int world, std::uint64_t seed,
             bool train);

  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }  // for this rank
  std::int64_t samples_per_epoch() const { return samples_per_epoch_; }  // for this rank
  std::int64_t total_samples() const { return total_; }                  // all ranks, all bins
  // Batch `index` (0 <= index < batches_per_epoch) of `epoch` for this rank.
  PlannedBatch batch(std::int64_t epoch, std::int64_t index);
  const std::vector<ShardFile>& files() const { return files_; }
  // Row permutation of file f in `epoch` (identity for evaluation).
  std::vector<std::int32_t> row_order(std::int64_t epoch, std::int32_t file) const;

 private:
  struct Bin {
    std::int32_t seq_len;
    std::vector<std::int32_t> files;  // file indices, in path order
    std::int64_t samples = 0;
  };
  struct EpochState {
    std::int64_t epoch = -1;
    std::vector<std::vector<std::int32_t>> file_order;   // per bin: files in epoch order
    std::vector<std::vector<std::int64_t>> file_offset;  // per bin: sequence offset of each file (+ total)
    std::vector<std::int32_t> batch_bin;                 // per epoch batch: its bin
    std::vector<std::int64_t> batch_in_bin;              // per epoch batch: j within its bin
  };
  void prepare(std::int64_t epoch);
  SampleRef at(std::int32_t bin, std::int64_t position);

  std::vector<ShardFile> files_;
  std::vector<Bin> bins_;
  std::vector<std::int64_t> bin_batches_;  // batches per epoch per bin for this rank
  std::int64_t batch_size_ = 1, batches_per_epoch_ = 0, samples_per_epoch_ = 0, total_ = 0;
  int rank_ = 0, world_ = 1;
  std::uint64_t seed_ = 0;
  bool train_ = true;
  EpochState state_;
  struct PermCache {
    std::int32_t file = -1;
    std::int64_t epoch = -1;
    std::vector<std::int32_t> rows;
  };
  std::vector<PermCache> perm_;  // per bin: the row permutation of the file read last
};

}  // namespace bertx::hdf5_pretraining
