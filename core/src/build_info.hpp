// build_info.hpp - versions recorded with every run: bertx, LibTorch, the git revision bertx was built from.
#pragma once
#include <string>

namespace bertx {
std::string bertx_version();   // e.g. "0.1.0"
std::string torch_version();   // version of the LibTorch headers bertx was compiled against, e.g. "1.13.0"
std::string git_revision();    // `git describe --always --dirty` at configure time, or "unknown"
std::string host_name();
}  // namespace bertx
