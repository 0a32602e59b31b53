// build_info.cpp - versions and host facts recorded with every run.
#include "base/build_info.hpp"

#include <unistd.h>

#include "bertx/version.hpp"

namespace bertx {

std::string bertx_version() { return BERTX_VERSION_STRING; }
// As CMake found it (core/CMakeLists.txt), with the CUDA it links: "2.11.0 (CUDA 13.0)" or "1.13.1 (CPU)".
std::string torch_version() {
  const std::string cuda = BERTX_TORCH_CUDA;
  return std::string(BERTX_TORCH_VERSION) + (cuda.empty() ? " (CPU)" : " (CUDA " + cuda + ")");
}
std::string git_revision() { return BERTX_GIT_REV; }

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace bertx
