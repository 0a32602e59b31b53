// safetensors.hpp - read and write safetensors files (https://github.com/huggingface/safetensors).
//
// Layout: 8-byte little-endian u64 N, then N bytes of JSON header
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
// then the data section: each tensor's raw little-endian C-order bytes at [begin, end) relative to the
// data section's start. Supported dtypes: F32, F64, F16, BF16, I64, I32, I8, U8, BOOL.
//
// The reader is a trust boundary (checkpoints and golden files come from elsewhere): every length, offset,
// shape and dtype is checked before anything is allocated, the tensors must tile the data section exactly
// (no gaps, overlaps or trailing bytes, as the reference implementation demands), and every failure is a
// one-line bertx::Error naming the file and the tensor or key at fault.
// The writer is atomic: it writes <path>.tmp, fsyncs it, renames it over <path> and fsyncs the folder.
#pragma once
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

namespace bertx {

using TensorMap = std::map<std::string, at::Tensor>;
using MetadataMap = std::map<std::string, std::string>;

// Loads every tensor of `path` into CPU memory (contiguous, the file's dtype). If `metadata` is given, it
// receives the "__metadata__" string map (empty when the file has none). Throws bertx::Error.
TensorMap load_safetensors(const std::string& path, MetadataMap* metadata = nullptr);

// Writes `tensors` (any device, any strides; copied to contiguous CPU memory one at a time) and the
// optional metadata to `path`, atomically. Throws bertx::Error naming the file and the tensor at fault
// (undefined tensor, unsupported dtype, non-strided layout, the reserved name "__metadata__") or the
// system call that failed.
void save_safetensors(const std::string& path, const TensorMap& tensors, const MetadataMap& metadata = {});

}  // namespace bertx
