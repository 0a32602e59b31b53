// build_info.hpp - versions recorded with every run: bertx, LibTorch, the git revision bertx was built from.
#pragma once
#include <string>

namespace bertx {
std::string bertx_version();  // e.g. "0.1.0"
std::string
torch_version();  // the LibTorch bertx was built against and its CUDA, e.g. "2.11.0 (CUDA 13.0)", "1.13.1 (CPU)"
std::string git_revision();  // `git describe --always --dirty` at configure time, or "unknown"
std::string host_name();
}  // namespace bertx
