// pt_pickle.hpp - the restricted pickle machine behind pt_archive.hpp: runs a torch.save data.pkl without Python,
// keeping containers, numbers, strings and tensor records (storage key, dtype, offset, sizes, strides); any other
// class is an opaque value that is never run. Bounded: every length is checked against the pickle, every tensor
// view against its storage's size. No LibTorch.
#pragma once
#include <string>
#include <vector>

#include "io/pt_archive.hpp"

namespace bertx::pt {

struct StateDict {
  std::vector<TensorRecord> tensors;  // the state dict's tensors, in file order
  std::size_t skipped = 0;            // its non-tensor values
  std::string key;                    // "" (the top-level dict) or the key holding it ("model", "state_dict")
};

// The state dict of a data.pkl: the top-level dict, or its "model" / "state_dict" / "model_state_dict" dict.
// Throws a one-line bertx::Error naming `where` when the pickle is malformed or holds no tensors.
StateDict read_state_dict(const std::string& pickle, const std::string& where);

}  // namespace bertx::pt
