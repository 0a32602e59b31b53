// tf_bundle.hpp - TensorFlow checkpoints (the V2 "tensor bundle" that tf.compat.v1.train.Saver and
// tf.train.Checkpoint write) read without TensorFlow: Google's BERT releases and BioBERT are in this format.
//
// <prefix>.index is a LevelDB-style SSTable (uncompressed blocks, each followed by a 5-byte trailer: type byte
// and masked crc32c; a 48-byte footer with the metaindex and index block handles and the table magic) mapping
// each variable name to a BundleEntryProto (dtype, shape, shard, offset, size, masked crc32c of the bytes); the
// empty key holds the BundleHeaderProto (shard count, endianness). <prefix>.data-NNNNN-of-MMMMM hold the raw
// little-endian tensor bytes. The protobuf fields are decoded by hand (bertx has no protobuf dependency).
//
// A trust boundary like safetensors.hpp: every length, offset and varint is bounded before use, every checksum
// is verified, and every failure is a one-line bertx::Error naming the file and the entry. No LibTorch here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/raw_dtype.hpp"

namespace bertx::tf {

using DType = RawDType;

struct BundleEntry {
  std::string name;
  DType dtype = DType::Other;
  std::int64_t raw_dtype = 0;  // TensorFlow's DataType number (for messages)
  std::vector<std::int64_t> shape;
  std::int64_t shard = 0;
  std::uint64_t offset = 0, size = 0;
  std::uint32_t masked_crc = 0;
  bool has_crc = false;
  bool sliced = false;  // a partitioned variable (slices): not supported, refused by read_tensor
};

class Bundle {
 public:
  // `prefix` is the checkpoint path without ".index" (e.g. "dir/bert_model.ckpt"). Reads and verifies the index.
  explicit Bundle(std::string prefix);
  const std::vector<BundleEntry>& entries() const { return entries_; }
  std::int64_t num_shards() const { return num_shards_; }
  // The entry's bytes from its data shard, size and crc32c checked (sliced, string or unknown dtypes refused).
  std::string read(const BundleEntry& e) const;
  const std::string& index_path() const { return index_path_; }

 private:
  std::string prefix_, index_path_;
  std::int64_t num_shards_ = 1;
  std::vector<BundleEntry> entries_;
};

// The checkpoint prefix in a folder: the `checkpoint` file's model_checkpoint_path when it names an existing
// .index, else the folder's only *.index file. "" when the folder has no .index file; throws when it has several
// and no `checkpoint` file picks one.
std::string find_checkpoint_prefix(const std::string& dir);

}  // namespace bertx::tf
