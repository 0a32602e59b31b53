// pretrain.hpp - `bertx data pretrain`: corpus -> tokenized documents -> Google-style instances ->
// NVIDIA-layout HDF5 shards (optionally binned by length, optionally unmasked for dynamic masking) and a
// stats.json summary. Deterministic: the same inputs, options and seed give byte-identical files for any
// thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/corpus.hpp"
#include "data/instances.hpp"

namespace bertx::data {

struct PretrainOptions {
  std::vector<CorpusInput> inputs;     // corpora (files or folders) with weights
  std::string vocab;                   // vocab.txt (must hold [CLS], [SEP], [MASK], [UNK])
  bool cased = false;                  // keep case (cased vocab); default lower-cases like bert-*-uncased
  DocFormat format = DocFormat::Auto;  // document boundaries of the input files
  InstanceOptions instances;           // seq_len, dupe_factor, masking, seed, ...
  std::int32_t bin_size = 0;           // > 0: one file per length bin of this width (LDDL phase 2 uses 64)
  int shards = 0;                      // output shards; 0 = one per 16M corpus tokens (at least 1)
  int threads = 0;                     // 0 = all hardware threads
  int gzip_level = 1;                  // HDF5 deflate level: 1 with shuffle is ~1.5x faster than level 4 and still
                                       // smaller than NVIDIA's files (h5py gzip level 4, no shuffle); 0 = none
  std::string out;                     // output folder (created)
};

struct PretrainStats {
  CorpusStats corpus;
  std::int64_t documents = 0, sentences = 0, tokens = 0;  // tokenized corpus
  std::int64_t instances = 0, instance_tokens = 0, random_next = 0;
  std::int64_t masked = 0, masked_as_mask = 0, masked_as_random = 0, masked_kept = 0;
  struct File {
    std::string name;
    std::int64_t instances;
    std::int32_t seq_len;
  };
  std::vector<File> files;
  double read_seconds = 0, create_seconds = 0, write_seconds = 0, total_seconds = 0;

  double masked_ratio() const { return instance_tokens ? double(masked) / double(instance_tokens) : 0.0; }
  double random_next_share() const { return instances ? double(random_next) / double(instances) : 0.0; }
};

// phase ("tokenize", "instances", "write"), done, total, unit ("B", "docs", "shards").
using ProgressFn = std::function<void(const char*, std::int64_t, std::int64_t, const char*)>;

// Runs the whole pipeline and writes <out>/shard-NNNNN[-bin-BB].hdf5 and <out>/stats.json.
PretrainStats run_pretrain(const PretrainOptions& options, const ProgressFn& progress = {});

// The stats.json document (also what the CLI prints as a summary).
std::string pretrain_stats_json(const PretrainOptions& options, const PretrainStats& stats);

}  // namespace bertx::data
