// bertx/data/hdf5_shard.hpp - pre-training shards in NVIDIA's HDF5 layout (DeepLearningExamples create_pretraining_data):
//   input_ids (N, S) i4, input_mask (N, S) i1, segment_ids (N, S) i1, masked_lm_positions (N, P) i4,
//   masked_lm_ids (N, P) i4, next_sentence_labels (N,) i1, gzip-compressed.
// Readers accept any integer width for each dataset (LDDL and older scripts write int64). Shards made
// for dynamic masking have no masked_lm_* datasets. Uses the HDF5 C API (thread-safe build on Debian).
// Library bertx_data (SDK target bertx::data): `bertx data` writes shards, the hdf5_pretraining reader plugin reads them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bertx::data {

struct ShardArrays {
  std::int64_t n = 0;                                            // instances
  std::int32_t seq_len = 0;                                      // S
  std::int32_t max_predictions = 0;                              // P (0 when the shard has no masked_lm_* datasets)
  std::vector<std::int32_t> input_ids;                           // N*S
  std::vector<std::int8_t> input_mask, segment_ids;              // N*S
  std::vector<std::int32_t> masked_lm_positions, masked_lm_ids;  // N*P
  std::vector<std::int8_t> next_sentence_labels;                 // N

  bool has_masks() const { return max_predictions > 0; }
  void resize(std::int64_t rows, std::int32_t seq, std::int32_t preds);
};

struct ShardInfo {
  std::int64_t n = 0;
  std::int32_t seq_len = 0, max_predictions = 0;
};

struct ShardWriteOptions {
  int gzip_level = 4;   // deflate level of every dataset (h5py's compression='gzip' default); 0 = uncompressed
  int threads = 0;      // chunk compression threads; 0 = all hardware threads
  bool shuffle = true;  // HDF5's byte-shuffle filter before deflate on multi-byte datasets (any HDF5 reader
                        // undoes it; deflate runs ~2x faster and files shrink)
};

// The datasets of a shard, for writers that produce rows on demand.
enum class ShardField { InputIds, InputMask, SegmentIds, MaskedLmPositions, MaskedLmIds, NextSentenceLabels };

// A shard described by its shape and a function that writes rows [first, first + count) of one field into
// `out` (row-major; int32 for ids and positions, int8 for mask, segments and labels; zero-filled before the
// call). Called from several threads at once for disjoint row ranges.
struct ShardSource {
  std::int64_t n = 0;
  std::int32_t seq_len = 0, max_predictions = 0;  // max_predictions 0: no masked_lm_* datasets
  std::function<void(ShardField field, std::int64_t first, std::int64_t count, void* out)> fill;
};

// Writes `path` atomically (a .tmp file renamed when complete). Chunks are deflated on `threads` threads
// and stored with H5Dwrite_chunk: a standard gzip-filtered dataset that h5py and NVIDIA's loader read.
void write_shard(const std::string& path, const ShardSource& source, const ShardWriteOptions& options = {});
void write_shard(const std::string& path, const ShardArrays& data, const ShardWriteOptions& options = {});

// Shapes only (cheap). Throws bertx::Error naming the file and dataset on a missing dataset, a non-integer
// dtype or inconsistent shapes.
ShardInfo inspect_shard(const std::string& path);

// Every dataset, converted to the in-memory types of ShardArrays.
ShardArrays read_shard(const std::string& path);

}  // namespace bertx::data
