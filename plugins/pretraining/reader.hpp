// reader.hpp - the hdf5_pretraining DatasetReader: NVIDIA-layout HDF5 shards (from `bertx data pretrain` or
// NVIDIA's / LDDL's scripts) -> pre-training batches (batch.hpp names), with per-epoch shuffling, disjoint
// data-parallel slices, length bins, optional dynamic masking, a background prefetch thread and exact
// position()/seek() for resume. The sample order lives in plan.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "bertx/dataset.hpp"
#include "bertx/options.hpp"

namespace bertx::hdf5_pretraining {

struct ReaderConfig {
  std::string dir;           // training shards folder (required)
  std::string eval_dir;      // held-out shards for split "eval"; empty = none
  std::int64_t seq_len = 0;  // longest sequence the shards may hold (0 = any); also sizes the dry-run memory estimate
  std::int64_t max_predictions = 20;  // masked positions per sequence when masking dynamically
  bool dynamic_masking = false;       // mask here, seeded by (run seed, epoch, sample): new masks every epoch
  double masked_lm_prob = 0.15;       // dynamic masking: fraction of tokens to predict
  bool whole_word_masking = false;    // dynamic masking: mask all pieces of a word together
  std::string vocab;                  // vocab.txt: [MASK]/[CLS]/[SEP] ids, size, "##" pieces (dynamic masking)
  std::int64_t prefetch = 4;          // batches prepared ahead on the background thread
  std::int64_t threads = 1;           // threads assembling one batch (>1 helps dynamic masking of big batches)
};

Schema reader_schema();
ReaderConfig reader_config(const Options& options);
std::shared_ptr<DatasetReader> make_reader(const ReaderConfig& config);

}  // namespace bertx::hdf5_pretraining
