// pt_archive.hpp - the tensors of a torch.save file (the zip format PyTorch writes since 1.6: <name>/data.pkl, a
// pickle, and <name>/data/<key>, each tensor storage's raw little-endian bytes) read without Python.
//
// Why not LibTorch's pickle_load: checkpoints such as NVIDIA DeepLearningExamples' ckpt_N.pt hold Python objects
// besides the weights (optimizer state, argparse namespaces, a pickled data loader) that it refuses. This reader
// runs a restricted pickle machine: containers, numbers and strings are kept, torch._utils._rebuild_tensor_v2 /
// _rebuild_parameter become tensor records, and every other class becomes an opaque value that is never run.
// It finds the state dict (the top-level dict, or its "model" / "state_dict" entry) and lists its tensors.
//
// A trust boundary: zip records (stored, not compressed) are bounded and crc32-checked, the pickle machine has
// bounded memo, stack and nesting, and every failure is a one-line bertx::Error naming the file. No LibTorch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/raw_dtype.hpp"

namespace bertx::pt {

using DType = RawDType;

struct TensorRecord {
  std::string name;
  DType dtype = DType::Float;
  std::string storage;  // the key under <archive>/data/
  std::int64_t storage_numel = 0;
  std::int64_t offset = 0;  // in elements
  std::vector<std::int64_t> sizes, strides;
};

class Archive {
 public:
  // Opens the zip and runs data.pkl. Throws bertx::Error naming the file.
  explicit Archive(std::string path);
  // The state dict's tensors in file order (non-tensor values are left out; `skipped` counts them).
  const std::vector<TensorRecord>& tensors() const { return tensors_; }
  std::size_t skipped() const { return skipped_; }
  // Where the state dict was: "" (the top level) or the key holding it ("model", "state_dict").
  const std::string& state_dict_key() const { return state_key_; }
  // A storage's bytes, checked against its zip crc32 and its element count (storage_numel * dtype size).
  std::string storage_bytes(const TensorRecord& t) const;
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    std::uint64_t offset = 0, size = 0;  // of the data, in the file
    std::uint32_t crc = 0;
  };
  std::string read_entry(const std::string& name) const;
  std::string path_, prefix_, state_key_;
  std::uint64_t file_size_ = 0;
  std::vector<std::pair<std::string, Entry>> entries_;
  std::vector<TensorRecord> tensors_;
  std::size_t skipped_ = 0;
};

}  // namespace bertx::pt
